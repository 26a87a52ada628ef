import EntitlementModel
import Foundation

/// What the App Store Server API client verifies the signed fields of Apple's answers with: the project's
/// signed-data verifier behind one method, so that replacing the verifier is one conformance and one argument.
public protocol ServerAPISignatureChecking: Sendable {
    /// Verifies `jws`, a signed field of `kind`, and returns its payload's JSON exactly as signed; throws why
    /// it is not authentic.
    func verifiedPayload(of jws: String, kind: SignedFieldKind) async throws -> Data
}

/// The kinds of signed field the Server API returns.
public enum SignedFieldKind: String, Sendable, Hashable {
    /// `signedTransactionInfo`, `signedTransactions[]`.
    case transaction
    /// `signedRenewalInfo`.
    case renewalInfo
    /// A notification's `signedPayload` (notification history).
    case notification
}

/// A signed field of an answer once verified: the JWS as Apple sent it and its decoded payload.
public struct ServerAPISigned<Payload: Sendable & Hashable>: Sendable, Hashable {
    /// The compact JWS, to keep or pass on as received.
    public var jws: String
    /// The payload decoded by the model's decoder for its kind.
    public var payload: Payload
    /// The payload's `signedDate`: renewal state carries it, so that older never overwrites newer.
    public var signedDate: Date?

    public init(jws: String, payload: Payload, signedDate: Date?) {
        self.jws = jws
        self.payload = payload
        self.signedDate = signedDate
    }
}
