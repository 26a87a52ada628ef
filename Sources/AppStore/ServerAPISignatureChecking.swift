import EntitlementModel
import Foundation

/// What the App Store Server API client verifies the signed fields of Apple's answers with: the project's
/// `SignedDataVerifier` behind one method (tests may stand in for it).
public protocol ServerAPISignatureChecking: Sendable {
    /// Verifies `jws`, a signed field of `kind`, and returns its payload's JSON exactly as signed with the
    /// payload's own `signedDate`; throws why it is not authentic or not this app's.
    func verifiedPayload(of jws: String, kind: SignedFieldKind) async throws -> (json: Data, signedDate: Date?)
}

extension SignedDataVerifier: ServerAPISignatureChecking {
    /// Each kind with its own rules (bundle, app and environment checks as for any signed payload).
    public func verifiedPayload(of jws: String, kind: SignedFieldKind) async throws -> (json: Data, signedDate: Date?) {
        switch kind {
        case .transaction:
            let verified = try await verifyTransaction(jws)
            return (verified.json, verified.signedDate)
        case .renewalInfo:
            let verified = try await verifyRenewalInfo(jws)
            return (verified.json, verified.signedDate)
        case .notification:
            let verified = try await verifyNotification(jws)
            return (verified.json, verified.signedDate)
        }
    }
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

    /// A verified field from its JWS as received, decoded payload and `signedDate`; nothing is checked here.
    public init(jws: String, payload: Payload, signedDate: Date?) {
        self.jws = jws
        self.payload = payload
        self.signedDate = signedDate
    }
}
