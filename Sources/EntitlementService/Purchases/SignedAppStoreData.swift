import AppStore
import EntitlementModel
import Foundation

/// A signed App Store payload that verified, decoded as its kind.
struct Verified<Payload: Sendable>: Sendable {
    var payload: Payload
    /// The payload's JSON exactly as signed (stored with a notification, so the worker need not verify again).
    var json: Data
    /// The payload's own top-level `signedDate`, when it has one.
    var signedDate: Date?
    /// The environment it names, as recorded.
    var environment: StoreEnvironment
}

/// Why a signed payload was refused, for the answer (authenticity or content) and the log (the reason).
struct SignedDataRefusal: Error, Sendable {
    /// The signature, chain or JWS form failed: the sender is not proven to be the App Store.
    var isAuthenticityFailure: Bool
    var reason: String
    /// The offending field of a payload that verifies but does not decode.
    var field: String?
}

/// The service's one way to verify signed App Store data (signed transactions, renewal info, V2 notifications):
/// every payload goes through here, so the verifier behind it is one decision.
struct SignedAppStoreData: Sendable {
    let verifier: SignedPayloadVerifier
    let bundleID: String?

    /// A signed transaction (`Transaction.jwsRepresentation`, `signedTransactionInfo`).
    func transaction(_ jws: String) async throws(SignedDataRefusal) -> Verified<AppStoreTransactionV2> {
        let (transaction, json, signedDate) = try verify(jws, as: AppStoreTransactionV2.init(jsonData:))
        try checkBundle(transaction.bundleID)
        guard let environment = transaction.environment else {
            throw SignedDataRefusal(isAuthenticityFailure: false, reason: "the transaction names no accepted environment")
        }
        return Verified(payload: transaction, json: json, signedDate: signedDate, environment: environment)
    }

    /// Signed renewal info (`signedRenewalInfo`); it names no app.
    func renewalInfo(_ jws: String) async throws(SignedDataRefusal) -> Verified<AppStoreRenewalInfoV2> {
        let (renewal, json, signedDate) = try verify(jws, as: AppStoreRenewalInfoV2.init(jsonData:))
        return Verified(payload: renewal, json: json, signedDate: signedDate, environment: renewal.environment ?? .production)
    }

    /// A V2 notification's `signedPayload` (its nested signed parts are verified with the methods above).
    func notification(_ jws: String) async throws(SignedDataRefusal) -> Verified<AppStoreNotificationV2> {
        let (notification, json, signedDate) = try verify(jws, as: AppStoreNotificationV2.init(jsonData:))
        try checkBundle(notification.bundleID)
        return Verified(payload: notification, json: json, signedDate: signedDate, environment: notification.environment ?? .production)
    }

    private func verify<Payload>(_ jws: String, as decode: (Data) throws(AppStoreDecodingError) -> Payload)
        throws(SignedDataRefusal) -> (Payload, Data, Date?) {
        let json: Data
        do {
            json = try verifier.verify(jws)
        } catch {
            throw SignedDataRefusal(isAuthenticityFailure: true, reason: error.reason)
        }
        do {
            return (try decode(json), json, SigningDate.of(payload: json))
        } catch {
            throw SignedDataRefusal(isAuthenticityFailure: false, reason: error.description, field: error.path.isEmpty ? nil : error.path)
        }
    }

    private func checkBundle(_ named: String?) throws(SignedDataRefusal) {
        guard let bundleID, named != bundleID else { return }
        throw SignedDataRefusal(isAuthenticityFailure: false, reason: "the payload names \(named.map { "'\($0)'" } ?? "no bundleId"), this app is '\(bundleID)'")
    }
}
