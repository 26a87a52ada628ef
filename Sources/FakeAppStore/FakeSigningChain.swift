import ServiceRuntime
import EntitlementModel
import Crypto
import Foundation
import SwiftASN1
import X509

/// A test root CA, intermediate and leaf shaped like Apple's App Store signing chain, and the compact JWS
/// (ES256) the App Store signs with it: what the fake App Store signs StoreKit 2 transactions, renewal info
/// and server notifications with, and what tests sign their own payloads with.
///
/// The shape is the one Apple's own library (`SignedDataVerifier`, OpenSSL in strict mode) accepts: P-256 keys
/// and ECDSA-SHA256 signatures; the root CA:true with keyCertSign and cRLSign; the intermediate CA:true,
/// path length 0, keyCertSign and cRLSign, Apple's WWDR marker 1.2.840.113635.100.6.2.1; the leaf CA:false,
/// digitalSignature, Apple's receipt-signing marker 1.2.840.113635.100.6.11.1 (both markers non-critical,
/// value DER NULL, as Apple's); basic constraints and key usage critical; a Subject Key Identifier on every
/// certificate and an Authority Key Identifier on the intermediate and the leaf. The certificates are valid
/// from ten years before they were made to twenty years after, so payloads dated in the past (`signedDate`)
/// verify too.
///
/// Made fresh (`make()`), or loaded from PEM files in a directory and created there when it is empty
/// (`init(directory:)`), so that a service can trust the same root across restarts of the fake.
public struct FakeSigningChain: Sendable {
    /// The self-signed root CA; a service must trust it, in place of Apple's root, to verify what the fake signs.
    public let root: Certificate
    /// The intermediate CA (path length 0, Apple's WWDR marker), signed by `root`.
    public let intermediate: Certificate
    /// The signing certificate (Apple's receipt-signing marker), signed by `intermediate`; its key signs every payload.
    public let leaf: Certificate
    /// The DER bytes of each certificate, as `x5c` carries them.
    public let rootDER: [UInt8]
    /// The intermediate's DER, `x5c[1]` of every JWS this chain signs.
    public let intermediateDER: [UInt8]
    /// The leaf's DER, `x5c[0]` of every JWS this chain signs.
    public let leafDER: [UInt8]
    /// The key the leaf certifies, which signs every payload.
    let leafKey: P256.Signing.PrivateKey
    /// The base64url of the JWS header, the same for every payload this chain signs.
    private let encodedHeader: String

    /// 1.2.840.113635.100.6.11.1: Apple's receipt-signing marker, on the leaf.
    public static let leafMarker: ASN1ObjectIdentifier = [1, 2, 840, 113635, 100, 6, 11, 1]
    /// 1.2.840.113635.100.6.2.1: Apple's WWDR intermediate marker, on the intermediate.
    public static let intermediateMarker: ASN1ObjectIdentifier = [1, 2, 840, 113635, 100, 6, 2, 1]

    /// Checks that the certificates chain (leaf signed by the intermediate, the intermediate by the root)
    /// and that `leafKey` is the leaf's key.
    init(root: Certificate, intermediate: Certificate, leaf: Certificate, leafKey: P256.Signing.PrivateKey) throws(FakeSigningChainError) {
        guard Certificate.PublicKey(leafKey.publicKey) == leaf.publicKey else {
            throw FakeSigningChainError("the leaf key does not belong to the leaf certificate")
        }
        guard intermediate.publicKey.isValidSignature(leaf.signature, for: leaf) else {
            throw FakeSigningChainError("the leaf certificate is not signed by the intermediate")
        }
        guard root.publicKey.isValidSignature(intermediate.signature, for: intermediate) else {
            throw FakeSigningChainError("the intermediate certificate is not signed by the root")
        }
        self.root = root
        self.intermediate = intermediate
        self.leaf = leaf
        self.leafKey = leafKey
        do {
            rootDER = try Self.der(root)
            intermediateDER = try Self.der(intermediate)
            leafDER = try Self.der(leaf)
        } catch {
            throw FakeSigningChainError("a certificate cannot be serialised: \(error)")
        }
        let x5c = [leafDER, intermediateDER, rootDER].map { JSONValue.string(Data($0).base64EncodedString()) }
        encodedHeader = Self.base64URL(Array((["alg": "ES256", "x5c": .array(x5c)] as JSONValue).jsonText.utf8))
    }

    /// A new chain with fresh keys; `name` starts each certificate's common name.
    public static func make(name: String = "Fake App Store", now: Date = Date()) -> FakeSigningChain {
        let rootKey = P256.Signing.PrivateKey(), intermediateKey = P256.Signing.PrivateKey(), leafKey = P256.Signing.PrivateKey()
        let validity = (now.addingTimeInterval(-10 * 365 * 86_400), now.addingTimeInterval(20 * 365 * 86_400))
        // Building certificates from fresh keys and fixed extensions fails only on a mistake in this code.
        do {
            let rootName = try distinguishedName("\(name) Root CA")
            let intermediateName = try distinguishedName("\(name) Intermediate CA")
            let rootSKI = SubjectKeyIdentifier(hash: .init(rootKey.publicKey))
            let intermediateSKI = SubjectKeyIdentifier(hash: .init(intermediateKey.publicKey))
            let root = try Certificate(
                version: .v3, serialNumber: .init(), publicKey: .init(rootKey.publicKey),
                notValidBefore: validity.0, notValidAfter: validity.1, issuer: rootName, subject: rootName,
                signatureAlgorithm: .ecdsaWithSHA256,
                extensions: try Certificate.Extensions {
                    Critical(BasicConstraints.isCertificateAuthority(maxPathLength: nil))
                    Critical(KeyUsage(keyCertSign: true, cRLSign: true))
                    rootSKI
                },
                issuerPrivateKey: .init(rootKey))
            let intermediate = try Certificate(
                version: .v3, serialNumber: .init(), publicKey: .init(intermediateKey.publicKey),
                notValidBefore: validity.0, notValidAfter: validity.1, issuer: rootName, subject: intermediateName,
                signatureAlgorithm: .ecdsaWithSHA256,
                extensions: try Certificate.Extensions {
                    Critical(BasicConstraints.isCertificateAuthority(maxPathLength: 0))
                    Critical(KeyUsage(keyCertSign: true, cRLSign: true))
                    intermediateSKI
                    AuthorityKeyIdentifier(keyIdentifier: rootSKI.keyIdentifier)
                    Certificate.Extension(oid: intermediateMarker, critical: false, value: derNull)
                },
                issuerPrivateKey: .init(rootKey))
            let leaf = try Certificate(
                version: .v3, serialNumber: .init(), publicKey: .init(leafKey.publicKey),
                notValidBefore: validity.0, notValidAfter: validity.1, issuer: intermediateName,
                subject: try distinguishedName("\(name) Receipt Signing"), signatureAlgorithm: .ecdsaWithSHA256,
                extensions: try Certificate.Extensions {
                    Critical(BasicConstraints.notCertificateAuthority)
                    Critical(KeyUsage(digitalSignature: true))
                    SubjectKeyIdentifier(hash: .init(leafKey.publicKey))
                    AuthorityKeyIdentifier(keyIdentifier: intermediateSKI.keyIdentifier)
                    Certificate.Extension(oid: leafMarker, critical: false, value: derNull)
                },
                issuerPrivateKey: .init(intermediateKey))
            return try FakeSigningChain(root: root, intermediate: intermediate, leaf: leaf, leafKey: leafKey)
        } catch {
            preconditionFailure("cannot build a fake signing chain: \(error)")
        }
    }

    /// `payload` (the bytes of a JSON object) as a compact JWS: base64url (no padding) of the header
    /// `{"alg":"ES256","x5c":[leaf, intermediate, root]}`, of the payload, and of the raw `r || s` ECDSA
    /// P-256 SHA-256 signature over the first two, joined by dots.
    public func sign(payload: some Sequence<UInt8>) -> String {
        let input = encodedHeader + "." + Self.base64URL(Array(payload))
        // Signing with a valid P-256 key cannot fail.
        let signature = try! leafKey.signature(for: Data(input.utf8))
        return input + "." + Self.base64URL(Array(signature.rawRepresentation))
    }

    /// `payload` as compact JSON (keys sorted), signed as `sign(payload:)` does.
    public func sign(_ payload: JSONValue) -> String {
        sign(payload: payload.jsonText.utf8)
    }

    /// The root certificate in PEM.
    public var rootPEM: String { Self.pem(rootDER) }

    /// Writes the root certificate to `path`, PEM when the name ends in `.pem`, else DER; through a temporary
    /// file renamed into place, so a reader never sees part of it.
    public func writeRootCertificate(to path: String) throws(FakeSigningChainError) {
        let bytes = path.hasSuffix(".pem") ? Array(rootPEM.utf8) : rootDER
        let temporary = path + ".tmp-\(getpid())"
        do {
            try Data(bytes).write(to: URL(fileURLWithPath: temporary))
            guard rename(temporary, path) == 0 else { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
        } catch {
            unlink(temporary)
            throw FakeSigningChainError("cannot write the root certificate to \(path): \(error)")
        }
    }

    static func der(_ certificate: Certificate) throws -> [UInt8] {
        var serializer = DER.Serializer()
        try serializer.serialize(certificate)
        return serializer.serializedBytes
    }

    static func pem(_ der: [UInt8]) -> String {
        PEMDocument(type: "CERTIFICATE", derBytes: der).pemString + "\n"
    }

    /// Base64url without padding (RFC 7515 §2).
    static func base64URL(_ bytes: [UInt8]) -> String {
        CompactJWS.base64URL(bytes)
    }

    private static let derNull: ArraySlice<UInt8> = [0x05, 0x00]

    private static func distinguishedName(_ commonName: String) throws -> DistinguishedName {
        try DistinguishedName {
            CommonName(commonName)
            OrganizationalUnitName("Fake App Store")
            OrganizationName("entitlement-service tests")
            CountryName("US")
        }
    }
}

/// Why a signing chain could not be loaded, checked or written; the message names the file.
public struct FakeSigningChainError: Error, Equatable, CustomStringConvertible {
    /// The whole description, e.g. `the leaf certificate is not signed by the intermediate`.
    public var message: String
    public var description: String { message }

    init(_ message: String) { self.message = message }
}
