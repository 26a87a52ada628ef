import Crypto
import Foundation
import SwiftASN1
import X509
@testable import AppStore

/// A root CA, intermediate and leaf made for one test, shaped like Apple's App Store chain (P-256 keys, key
/// identifiers, key usage, Apple's marker extensions), that signs compact JWS the way the App Store does.
/// `Defect`s and validity windows make the broken variants verification must refuse.
struct TestSigningChain {
    /// One way to break the chain's certificates.
    enum Defect: Hashable, CaseIterable {
        case leafWithoutMarker, intermediateWithoutMarker, leafMarkerCritical, intermediateMarkerCritical
        case leafCarriesIntermediateMarker, intermediateNotCA, intermediateWithoutBasicConstraints
        case intermediateWithoutKeyCertSign, intermediateWithoutKeyUsage, intermediateWithoutSubjectKeyIdentifier
        case leafWithoutAuthorityKeyIdentifier, intermediateWithoutAuthorityKeyIdentifier, leafKeyCertSignNotCA
        case leafUnknownCriticalExtension, leafWithEmptySubject, leafWithEmptySubjectAlternativeName
        case leafAuthorityNamesAnotherKey, leafAuthorityNamesAnotherSerial, leafAuthorityNamesAnotherIssuer
        case intermediateAuthorityNamesAnotherKey
    }

    let rootKey = P256.Signing.PrivateKey()
    let intermediateKey = P256.Signing.PrivateKey()
    /// Signs with the leaf's key (P-256, or P-384 for `p384Leaf`), raw `r || s`.
    private let leafSign: (Data) throws -> Data
    let root: Certificate
    let intermediate: Certificate
    let leaf: Certificate

    /// Ten years before now to ten years after it.
    static let currentValidity = Date().addingTimeInterval(-86_400 * 3_650)...Date().addingTimeInterval(86_400 * 3_650)

    init(name: String = "Test", defects: Set<Defect> = [], p384Leaf: Bool = false,
         rootValidity: ClosedRange<Date> = currentValidity, intermediateValidity: ClosedRange<Date> = currentValidity,
         leafValidity: ClosedRange<Date> = currentValidity) throws {
        let leafPublic: Certificate.PublicKey
        if p384Leaf {
            let key = P384.Signing.PrivateKey()
            leafPublic = .init(key.publicKey)
            leafSign = { try key.signature(for: $0).rawRepresentation }
        } else {
            let key = P256.Signing.PrivateKey()
            leafPublic = .init(key.publicKey)
            leafSign = { try key.signature(for: $0).rawRepresentation }
        }
        let rootName = try DistinguishedName { CommonName("\(name) Root CA") }
        let intermediateName = try DistinguishedName { CommonName("\(name) Intermediate") }
        let rootPublic = Certificate.PublicKey(rootKey.publicKey), intermediatePublic = Certificate.PublicKey(intermediateKey.publicKey)
        let caUsage = try Certificate.Extension(KeyUsage(keyCertSign: true, cRLSign: true), critical: true)
        let marker = { (oid: ASN1ObjectIdentifier, critical: Bool) in Certificate.Extension(oid: oid, critical: critical, value: [0x05, 0x00]) }

        root = try Self.issue(rootPublic, subject: rootName, issuer: rootName, by: .init(rootKey), validity: rootValidity, [
            try .init(BasicConstraints.isCertificateAuthority(maxPathLength: nil), critical: true), caUsage,
            try .init(SubjectKeyIdentifier(hash: rootPublic), critical: false),
        ])

        var intermediateExtensions: [Certificate.Extension] = []
        if defects.contains(.intermediateNotCA) {
            intermediateExtensions.append(try .init(BasicConstraints.notCertificateAuthority, critical: true))
        } else if !defects.contains(.intermediateWithoutBasicConstraints) {
            intermediateExtensions.append(try .init(BasicConstraints.isCertificateAuthority(maxPathLength: 0), critical: true))
        }
        if defects.contains(.intermediateWithoutKeyCertSign) {
            intermediateExtensions.append(try .init(KeyUsage(digitalSignature: true), critical: true))
        } else if !defects.contains(.intermediateWithoutKeyUsage) {
            intermediateExtensions.append(caUsage)
        }
        if !defects.contains(.intermediateWithoutSubjectKeyIdentifier) {
            intermediateExtensions.append(try .init(SubjectKeyIdentifier(hash: intermediatePublic), critical: false))
        }
        if !defects.contains(.intermediateWithoutAuthorityKeyIdentifier) {
            let named = defects.contains(.intermediateAuthorityNamesAnotherKey) ? Certificate.PublicKey(P256.Signing.PrivateKey().publicKey) : rootPublic
            intermediateExtensions.append(try .init(Self.authorityKeyIdentifier(named), critical: false))
        }
        if !defects.contains(.intermediateWithoutMarker) {
            intermediateExtensions.append(marker(AppStoreChainPolicy.intermediateMarker, defects.contains(.intermediateMarkerCritical)))
        }
        let intermediateSerial = Certificate.SerialNumber()
        intermediate = try Self.issue(intermediatePublic, subject: intermediateName, issuer: rootName, by: .init(rootKey),
                                      validity: intermediateValidity, serialNumber: intermediateSerial, intermediateExtensions)

        var leafExtensions: [Certificate.Extension] = [
            try .init(BasicConstraints.notCertificateAuthority, critical: true),
            try .init(KeyUsage(digitalSignature: true, keyCertSign: defects.contains(.leafKeyCertSignNotCA)), critical: true),
            try .init(SubjectKeyIdentifier(hash: leafPublic), critical: false),
        ]
        if !defects.contains(.leafWithoutAuthorityKeyIdentifier) {
            // The leaf names its issuer every way an authorityKeyIdentifier can: key id, the issuer's issuer, its serial.
            let key = defects.contains(.leafAuthorityNamesAnotherKey) ? Certificate.PublicKey(P256.Signing.PrivateKey().publicKey) : intermediatePublic
            let serial = defects.contains(.leafAuthorityNamesAnotherSerial) ? Certificate.SerialNumber() : intermediateSerial
            let issuerName = defects.contains(.leafAuthorityNamesAnotherIssuer) ? intermediateName : rootName
            leafExtensions.append(try .init(AuthorityKeyIdentifier(keyIdentifier: SubjectKeyIdentifier(hash: key).keyIdentifier,
                                                                   authorityCertIssuer: [.directoryName(issuerName)],
                                                                   authorityCertSerialNumber: serial), critical: false))
        }
        if defects.contains(.leafWithEmptySubjectAlternativeName) {
            leafExtensions.append(try .init(SubjectAlternativeNames([]), critical: false))
        }
        if defects.contains(.leafCarriesIntermediateMarker) {
            leafExtensions.append(marker(AppStoreChainPolicy.intermediateMarker, false))
        } else if !defects.contains(.leafWithoutMarker) {
            leafExtensions.append(marker(AppStoreChainPolicy.leafMarker, defects.contains(.leafMarkerCritical)))
        }
        if defects.contains(.leafUnknownCriticalExtension) {
            leafExtensions.append(Certificate.Extension(oid: [1, 3, 6, 1, 4, 1, 99999, 1], critical: true, value: [0x05, 0x00]))
        }
        let leafName = defects.contains(.leafWithEmptySubject) ? DistinguishedName() : try DistinguishedName { CommonName("\(name) Leaf") }
        leaf = try Self.issue(leafPublic, subject: leafName, issuer: intermediateName,
                              by: .init(intermediateKey), validity: leafValidity, leafExtensions)
    }

    /// A certificate for `key` named `subject`, signed by `issuerKey` in the name of `issuer`.
    static func issue(_ key: Certificate.PublicKey, subject: DistinguishedName, issuer: DistinguishedName, by issuerKey: Certificate.PrivateKey,
                      validity: ClosedRange<Date>, serialNumber: Certificate.SerialNumber = .init(),
                      _ extensions: [Certificate.Extension]) throws -> Certificate {
        try Certificate(version: .v3, serialNumber: serialNumber, publicKey: key, notValidBefore: validity.lowerBound,
                        notValidAfter: validity.upperBound, issuer: issuer, subject: subject, signatureAlgorithm: .ecdsaWithSHA256,
                        extensions: try Certificate.Extensions(extensions), issuerPrivateKey: issuerKey)
    }

    /// An authorityKeyIdentifier naming `issuerKey` (by its subjectKeyIdentifier hash).
    static func authorityKeyIdentifier(_ issuerKey: Certificate.PublicKey) -> AuthorityKeyIdentifier {
        AuthorityKeyIdentifier(keyIdentifier: SubjectKeyIdentifier(hash: issuerKey).keyIdentifier)
    }

    /// The DER bytes of `certificate`.
    static func der(_ certificate: Certificate) throws -> [UInt8] {
        var serializer = DER.Serializer()
        try serializer.serialize(certificate)
        return serializer.serializedBytes
    }

    /// `certificate` as an `x5c` entry (standard base64 DER).
    static func x5c(_ certificate: Certificate) throws -> String {
        Data(try der(certificate)).base64EncodedString()
    }

    /// Writes the root's DER to a temporary file (for `APPLE_ROOT_CERTIFICATES`) and returns its path.
    func writeRoot() throws -> String {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("test-root-\(UUID().uuidString).der")
        try Data(Self.der(root)).write(to: url)
        return url.path
    }

    /// The chain as the App Store sends it in `x5c`: leaf, intermediate, root.
    var x5c: [String] {
        get throws { try [leaf, intermediate, root].map(Self.x5c) }
    }

    /// `payload` as a compact ES256 JWS signed by the leaf; `header` defaults to `alg` ES256 and the whole chain.
    func sign(_ payload: [String: Any], header: [String: Any]? = nil) throws -> String {
        try sign(payloadBytes: try JSONSerialization.data(withJSONObject: payload), header: header)
    }

    /// `payloadBytes` (JSON or not) as a compact JWS signed by the leaf.
    func sign(payloadBytes: Data, header: [String: Any]? = nil) throws -> String {
        let header = try JSONSerialization.data(withJSONObject: try header ?? ["alg": "ES256", "x5c": x5c])
        let input = Self.base64URL(header) + "." + Self.base64URL(payloadBytes)
        return input + "." + Self.base64URL(try leafSign(Data(input.utf8)))
    }

    /// `payload` as an unsigned JWS (`alg` none), the way Xcode and local testing hand out payloads.
    static func unsigned(_ payload: [String: Any]) throws -> String {
        base64URL(try JSONSerialization.data(withJSONObject: ["alg": "none"])) + "."
            + base64URL(try JSONSerialization.data(withJSONObject: payload)) + "."
    }

    /// RFC 7515 base64url without padding.
    static func base64URL(_ data: some DataProtocol) -> String {
        Data(data).base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }
}
