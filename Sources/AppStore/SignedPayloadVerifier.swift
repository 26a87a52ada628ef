import ServiceRuntime
import Crypto
import EntitlementModel
import Foundation
import SwiftASN1
import X509

/// Verifies the JWS the App Store signs (notifications, transactions, renewal info) and hands back the payload.
///
/// A payload is authentic when its header says `ES256`, its `x5c` holds at least a leaf and an intermediate,
/// the intermediate is signed by the key of one of the trusted roots (the root need not be sent, nor be
/// byte-identical when it is), the leaf by the intermediate, both carry Apple's marker extensions (receipt
/// signing on the leaf, WWDR on the intermediate) and are valid at the payload's `signedDate`, and the leaf's
/// P-256 key verifies the raw `r || s` signature over `header.payload`. The signing date, not the current
/// time, is what the certificates are checked against: Apple's leaf certificates expire while the payloads
/// they signed stay valid. A payload with no `signedDate` is checked at the current time.
///
/// Pure CPU work (a few ECDSA verifications), cheap enough for the loop thread; the roots are loaded once.
public struct SignedPayloadVerifier: Sendable {
    /// The trust anchors; Apple Root CA - G3 unless `APPLE_ROOT_CERTIFICATES` names others.
    public let roots: [Certificate]

    /// Trusts `roots` (Apple Root CA - G3 unless configured otherwise).
    public init(roots: [Certificate]) {
        self.roots = roots
    }

    /// 1.2.840.113635.100.6.11.1: Apple's "receipt signing" marker, required on the leaf.
    static let leafMarker: ASN1ObjectIdentifier = [1, 2, 840, 113635, 100, 6, 11, 1]
    /// 1.2.840.113635.100.6.2.1: Apple's "WWDR intermediate" marker, required on the intermediate.
    static let intermediateMarker: ASN1ObjectIdentifier = [1, 2, 840, 113635, 100, 6, 2, 1]

    /// Verifies `jws` and returns its payload; the error says which check failed, for the log.
    public func verify(_ jws: String) throws(SignedPayloadError) -> Data {
        let parsed: CompactJWS
        do {
            parsed = try CompactJWS(jws)
        } catch {
            throw SignedPayloadError(error.description)
        }
        guard parsed.algorithm == "ES256" else {
            throw SignedPayloadError("alg is \(parsed.algorithm.map { "'\($0)'" } ?? "missing"), expected ES256")
        }
        guard parsed.certificateChain.count >= 2 else {
            throw SignedPayloadError("x5c holds \(parsed.certificateChain.count) certificate(s), expected at least 2")
        }
        let leaf = try certificate(parsed.certificateChain[0], "x5c[0]")
        let intermediate = try certificate(parsed.certificateChain[1], "x5c[1]")
        let at = SigningDate.of(payload: parsed.payload) ?? Date()
        try checkChain(leaf: leaf, intermediate: intermediate, at: at)
        guard let key = P256.Signing.PublicKey(leaf.publicKey) else { throw SignedPayloadError("the leaf's key is not P-256") }
        guard let signature = try? P256.Signing.ECDSASignature(rawRepresentation: parsed.signature),
              key.isValidSignature(signature, for: parsed.signingInput) else {
            throw SignedPayloadError("the ES256 signature does not verify with the leaf's key")
        }
        return parsed.payload
    }

    private func certificate(_ der: [UInt8], _ name: String) throws(SignedPayloadError) -> Certificate {
        do {
            return try Certificate(derEncoded: der)
        } catch {
            throw SignedPayloadError("\(name) is not an X.509 certificate")
        }
    }

    private func checkChain(leaf: Certificate, intermediate: Certificate, at: Date) throws(SignedPayloadError) {
        let when = RFC3339.string(from: at)
        guard intermediate.publicKey.isValidSignature(leaf.signature, for: leaf) else {
            throw SignedPayloadError("x5c[0] is not signed by x5c[1]")
        }
        guard case .isCertificateAuthority? = try? intermediate.extensions.basicConstraints else {
            throw SignedPayloadError("x5c[1] is not a certificate authority")
        }
        guard let root = roots.first(where: { $0.publicKey.isValidSignature(intermediate.signature, for: intermediate) }) else {
            throw SignedPayloadError("x5c[1] is not signed by a trusted root")
        }
        for (name, certificate) in [("x5c[0]", leaf), ("x5c[1]", intermediate), ("the trusted root", root)]
        where !(certificate.notValidBefore...certificate.notValidAfter).contains(at) {
            throw SignedPayloadError("\(name) is not valid at the signing date \(when)")
        }
        guard leaf.extensions[oid: Self.leafMarker] != nil else {
            throw SignedPayloadError("x5c[0] lacks Apple's receipt-signing marker \(Self.leafMarker)")
        }
        guard intermediate.extensions[oid: Self.intermediateMarker] != nil else {
            throw SignedPayloadError("x5c[1] lacks Apple's intermediate marker \(Self.intermediateMarker)")
        }
    }
}

/// Why a signed payload is not authentic; for the log (the client sees a generic problem).
public struct SignedPayloadError: Error, Equatable, CustomStringConvertible {
    public var reason: String
    public var description: String { "signed payload rejected: \(reason)" }

    init(_ reason: String) { self.reason = reason }
}
