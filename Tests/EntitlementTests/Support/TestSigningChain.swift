import Crypto
import Foundation
import SwiftASN1
import X509
@testable import AppStore
@testable import EntitlementService
@testable import FakeAppStore
@testable import ServiceRuntime

/// A root CA, intermediate and leaf made for one test, shaped like Apple's App Store chain (P-256 keys, Apple's
/// marker extensions), that signs compact JWS the way the App Store does.
struct TestSigningChain {
    let rootKey = P256.Signing.PrivateKey()
    let intermediateKey = P256.Signing.PrivateKey()
    let leafKey = P256.Signing.PrivateKey()
    let root: Certificate
    let intermediate: Certificate
    let leaf: Certificate

    init(name: String = "Test") throws {
        let now = Date()
        let (start, end) = (now.addingTimeInterval(-86_400), now.addingTimeInterval(86_400 * 365))
        let rootName = try DistinguishedName { CommonName("\(name) Root CA") }
        let intermediateName = try DistinguishedName { CommonName("\(name) Intermediate") }
        root = try Certificate(
            version: .v3, serialNumber: .init(), publicKey: .init(rootKey.publicKey), notValidBefore: start, notValidAfter: end,
            issuer: rootName, subject: rootName, signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.isCertificateAuthority(maxPathLength: nil))
                Critical(KeyUsage(keyCertSign: true, cRLSign: true))
            },
            issuerPrivateKey: .init(rootKey))
        intermediate = try Certificate(
            version: .v3, serialNumber: .init(), publicKey: .init(intermediateKey.publicKey), notValidBefore: start, notValidAfter: end,
            issuer: rootName, subject: intermediateName, signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.isCertificateAuthority(maxPathLength: 0))
                Critical(KeyUsage(keyCertSign: true, cRLSign: true))
                Certificate.Extension(oid: SignedPayloadVerifier.intermediateMarker, critical: false, value: [0x05, 0x00])
            },
            issuerPrivateKey: .init(rootKey))
        leaf = try Certificate(
            version: .v3, serialNumber: .init(), publicKey: .init(leafKey.publicKey), notValidBefore: start, notValidAfter: end,
            issuer: intermediateName, subject: try DistinguishedName { CommonName("\(name) Leaf") }, signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.notCertificateAuthority)
                Certificate.Extension(oid: SignedPayloadVerifier.leafMarker, critical: false, value: [0x05, 0x00])
            },
            issuerPrivateKey: .init(intermediateKey))
    }

    /// The DER bytes of `certificate`.
    static func der(_ certificate: Certificate) throws -> [UInt8] {
        var serializer = DER.Serializer()
        try serializer.serialize(certificate)
        return serializer.serializedBytes
    }

    /// Writes the root's DER to a temporary file (for `APPLE_ROOT_CERTIFICATES`) and returns its path.
    func writeRoot() throws -> String {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("test-root-\(UUID().uuidString).der")
        try Data(Self.der(root)).write(to: url)
        return url.path
    }

    /// `payload` as a compact ES256 JWS signed by the leaf, with the whole chain in `x5c`.
    func sign(_ payload: [String: Any]) throws -> String {
        let x5c = try [leaf, intermediate, root].map { Data(try Self.der($0)).base64EncodedString() }
        let header = try JSONSerialization.data(withJSONObject: ["alg": "ES256", "x5c": x5c] as [String: Any])
        let input = Self.base64URL(header) + "." + Self.base64URL(try JSONSerialization.data(withJSONObject: payload))
        let signature = try leafKey.signature(for: Data(input.utf8))
        return input + "." + Self.base64URL(signature.rawRepresentation)
    }

    private static func base64URL(_ data: Data) -> String {
        data.base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }
}
