import Crypto
import EntitlementModel
import Foundation
import X509
@testable import FakeAppStore
@testable import ServiceRuntime

/// Checks a compact JWS as Apple's verifier does, with swift-certificates and swift-crypto rather than the
/// service's own verifier: canonical base64url parts without padding, `alg` ES256, an `x5c` of three
/// certificates whose leaf and intermediate chain to `root` under RFC 5280 (swift-certificates' `Verifier`
/// with `RFC5280Policy`) at the payload's `signedDate`, Apple's marker extensions, and the raw `r || s`
/// P-256 signature of the leaf's key. Returns the payload.
enum SignedJWSCheck {
    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    static func verify(_ jws: String, root: Certificate) async throws -> JSONValue {
        let allowed = Set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.".utf8)
        guard jws.utf8.allSatisfy(allowed.contains) else { throw Failure(description: "not base64url without padding") }
        let parsed = try CompactJWS(jws)
        guard parsed.algorithm == "ES256" else { throw Failure(description: "alg is \(parsed.algorithm ?? "missing")") }
        guard parsed.certificateChain.count == 3 else { throw Failure(description: "x5c holds \(parsed.certificateChain.count) certificates") }
        let leaf = try Certificate(derEncoded: parsed.certificateChain[0])
        let intermediate = try Certificate(derEncoded: parsed.certificateChain[1])
        let payload = try JSONDecoder().decode(JSONValue.self, from: parsed.payload)
        var when = Date()
        if case .object(let members) = payload, case .int(let milliseconds)? = members["signedDate"] {
            when = Date(timeIntervalSince1970: Double(milliseconds) / 1_000)
        }
        var verifier = Verifier(rootCertificates: CertificateStore([root])) { RFC5280Policy(validationTime: when) }
        guard case .validCertificate(let chain) = await verifier.validate(leaf: leaf, intermediates: CertificateStore([intermediate])),
              Array(chain).count == 3 else {
            throw Failure(description: "the chain does not validate to the root under RFC 5280 at \(when)")
        }
        guard leaf.extensions[oid: FakeSigningChain.leafMarker] != nil,
              intermediate.extensions[oid: FakeSigningChain.intermediateMarker] != nil else {
            throw Failure(description: "a marker extension is missing")
        }
        guard parsed.signature.count == 64, let key = P256.Signing.PublicKey(leaf.publicKey),
              let signature = try? P256.Signing.ECDSASignature(rawRepresentation: parsed.signature),
              key.isValidSignature(signature, for: Data(parsed.signingInput)) else {
            throw Failure(description: "the ES256 signature does not verify with the leaf's key")
        }
        return payload
    }

    /// The payload of `jws`, decoded without any check.
    static func payload(_ jws: String) throws -> JSONValue {
        try JSONDecoder().decode(JSONValue.self, from: try CompactJWS(jws).payload)
    }
}

extension JSONValue {
    /// The member `key` of an object; nil for a missing member or anything but an object.
    subscript(member key: String) -> JSONValue? {
        if case .object(let members) = self { members[key] } else { nil }
    }

    /// The text of a string value; nil for anything else.
    var text: String? {
        if case .string(let text) = self { text } else { nil }
    }
}
