import AppStore
import Crypto
import ServiceRuntime
import EntitlementModel
import Foundation

/// `POST /v1/notifications/app-store`: App Store Server Notifications, durable, once, in order.
///
/// Version 1 notifications carry the shared secret as `password` (checked in constant time) and Apple's
/// `unified_receipt`. Version 2 notifications are one `signedPayload`, verified with its signed transaction and
/// renewal info (`SignedDataVerifier`: Apple's rules). A notification is stored before the answer, once per
/// `notificationUUID` (V1: per SHA-256 of the body), so 200 means durable and the same notification again changes nothing. It is
/// then applied before answering where possible (`PurchaseRecorder.applyReceived`); what could not be is applied
/// by `NotificationWorker`. A purchase without an owner parks its notification until one appears; TEST,
/// summaries and external purchase tokens are stored as `ignored`.
///
/// Answers: 200 received; 400 not a JSON object or an undecodable V1 body; 401 a wrong V1 password or a V2
/// signature or chain that does not verify; 422 a verified V2 payload that does not decode or is for another
/// app or environment; 503 when it could not be stored. Verifying, storing and applying are `NotificationIntake`'s,
/// which the notification history recovery shares.
@Loop
struct NotificationRoutes {
    let sharedSecret: String?
    let intake: NotificationIntake

    /// Registers the route on `apple`: the `/v1` group of Apple's calls (no bearer key: the notification proves
    /// itself; its changes visible on this instance once answered, as for every write).
    func register(on apple: RouterGroup) {
        apple.post("/notifications/app-store") { request, _ in try await receive(request) }
    }

    private func receive(_ request: HTTPRequest) async throws -> HTTPResponse {
        guard String(validating: request.body, as: UTF8.self) != nil else { throw ProblemError.badRequest("The body must be a JSON object.") }
        try request.refuseLenientJSON()
        guard let object = try? JSONSerialization.jsonObject(with: Data(request.body)) as? [String: Any] else {
            throw ProblemError.badRequest("The body must be a JSON object.")
        }
        let incoming: StoredNotification
        if let signedPayload = object["signedPayload"] {
            guard let jws = signedPayload as? String else {
                throw ProblemError.badRequest("signedPayload must be a string (a compact JWS).", field: "signedPayload")
            }
            incoming = try await intake.verified(jws)
        } else {
            incoming = try version1(request.body, object: object)
        }
        let outcome = try await intake.take(incoming)
        Log.info("app_store_notification", ["notification_uuid": incoming.uuid, "version": incoming.version,
                                             "type": incoming.type, "subtype": incoming.subtype, "environment": incoming.environment,
                                             "original_transaction_id": incoming.originalTransactionID, "duplicate": !outcome.stored,
                                             "state": outcome.stored ? outcome.state.rawValue : nil])
        return .json(["status": "received"])
    }

    /// A version 1 notification: decoded, its password checked, keyed by the SHA-256 of the body (as every release
    /// has keyed it, so that one Apple sends again is recorded once across a deploy; the secret is random, too long
    /// to be guessed from its hash) and stored without its password.
    private func version1(_ body: [UInt8], object: [String: Any]) throws -> StoredNotification {
        let notification: AppStoreNotificationV1
        do {
            notification = try AppStoreNotificationV1(jsonData: Data(body))
        } catch {
            throw ProblemError.badRequest("The notification does not decode: \(error.path).", field: error.path)
        }
        guard let sharedSecret, let password = notification.password,
              APIKeys.constantTimeEqual(Array(password.utf8), Array(sharedSecret.utf8)) else {
            // Said in the log (never the value): after a change of the shared secret every V1 notification lands here.
            Log.warning("app_store_notification_refused", ["version": 1, "reason": notification.password == nil ? "no password"
                        : sharedSecret == nil ? "APPLE_SHARED_SECRET is not set" : "the password is not the shared secret"])
            throw ProblemError(status: 401, detail: "The notification's password is not this app's shared secret.", extra: ["field": "password"])
        }
        var withoutPassword = object
        withoutPassword["password"] = nil
        let stored = String(decoding: try JSONSerialization.data(withJSONObject: withoutPassword, options: [.sortedKeys]), as: UTF8.self)
        let transactions = notification.transactions()
        let subject = transactions.max { $0.wasBought(before: $1) }
        return StoredNotification(
            uuid: "v1:" + SHA256.hash(data: body).map { String(format: "%02x", $0) }.joined(), version: 1,
            type: notification.notificationType, subtype: nil, signedDate: Date(), environment: (notification.environment ?? .production).rawValue,
            originalTransactionID: subject?.originalTransactionID, transactionID: subject?.transactionID, signedPayload: stored,
            transactionInfo: nil, renewalInfo: nil, state: transactions.isEmpty ? .ignored : .received)
    }
}
