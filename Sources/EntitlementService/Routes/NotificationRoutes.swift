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
/// app or environment; 503 when it could not be stored.
@Loop
struct NotificationRoutes {
    let sharedSecret: String?
    let signatures: SignedDataVerifier
    let db: PostgresPool
    let recorder: PurchaseRecorder
    let catalog: CatalogCache
    /// How long a stored notification is left to the request that stored it before the worker may take it.
    let lease: Duration
    let store = NotificationStore()

    /// Registers the route on `apple`: the `/v1` group of Apple's calls (no bearer key: the notification proves
    /// itself; its changes visible on this instance once answered, as for every write).
    func register(on apple: RouterGroup) {
        apple.post("/notifications/app-store") { request, _ in try await receive(request) }
    }

    private func receive(_ request: HTTPRequest) async throws -> HTTPResponse {
        guard String(validating: request.body, as: UTF8.self) != nil,
              let object = try? JSONSerialization.jsonObject(with: Data(request.body)) as? [String: Any] else {
            throw ProblemError.badRequest("The body must be a JSON object.")
        }
        let incoming: StoredNotification
        if let signedPayload = object["signedPayload"] {
            guard let jws = signedPayload as? String else {
                throw ProblemError.badRequest("signedPayload must be a string (a compact JWS).", field: "signedPayload")
            }
            incoming = try await signed(jws)
        } else {
            incoming = try version1(request.body, object: object)
        }
        let stored = try await store.insert(incoming, lease: lease, on: db)
        let state = stored && incoming.state == .received ? await applyNow(incoming) : incoming.state
        Log.info("app_store_notification", ["request_id": request.requestID, "notification_uuid": incoming.uuid, "version": incoming.version,
                                             "type": incoming.type, "subtype": incoming.subtype, "environment": incoming.environment,
                                             "original_transaction_id": incoming.originalTransactionID, "duplicate": !stored,
                                             "state": stored ? state.rawValue : nil])
        return .json(["status": "received"])
    }

    /// Applies a notification just stored: `applied` or `parked`, or still `received` when that failed (the
    /// worker applies it then).
    private func applyNow(_ notification: StoredNotification) async -> NotificationState {
        do {
            let application = try await recorder.applyReceived(notification, catalog: try await catalog.current())
            return application.map { $0.owner == nil ? .parked : .applied } ?? .applied
        } catch {
            Log.warning("app_store_notification_apply_deferred", ["notification_uuid": notification.uuid, "error": String(describing: error)])
            return .received
        }
    }

    /// A version 1 notification: decoded, its password checked, keyed by the SHA-256 of the body and stored
    /// without its password.
    private func version1(_ body: [UInt8], object: [String: Any]) throws -> StoredNotification {
        let notification: AppStoreNotificationV1
        do {
            notification = try AppStoreNotificationV1(jsonData: Data(body))
        } catch {
            throw ProblemError.badRequest("The notification does not decode: \(error.path).", field: error.path)
        }
        guard let sharedSecret, let password = notification.password,
              APIKeys.constantTimeEqual(Array(password.utf8), Array(sharedSecret.utf8)) else {
            throw ProblemError(status: 401, detail: "The notification's password is not this app's shared secret.", extra: ["field": "password"])
        }
        var withoutPassword = object
        withoutPassword["password"] = nil
        let stored = String(decoding: try JSONSerialization.data(withJSONObject: withoutPassword, options: [.sortedKeys]), as: UTF8.self)
        let transactions = notification.transactions()
        let subject = transactions.max { ($0.purchaseDate, $0.transactionID) < ($1.purchaseDate, $1.transactionID) }
        return StoredNotification(
            uuid: "v1:" + SHA256.hash(data: body).map { String(format: "%02x", $0) }.joined(), version: 1,
            type: notification.notificationType, subtype: nil, signedDate: Date(), environment: (notification.environment ?? .production).rawValue,
            originalTransactionID: subject?.originalTransactionID, transactionID: subject?.transactionID, signedPayload: stored,
            transactionInfo: nil, renewalInfo: nil, state: transactions.isEmpty ? .ignored : .received)
    }

    /// A version 2 notification, verified with its signed parts.
    private func signed(_ jws: String) async throws -> StoredNotification {
        let verified = try await verify(part: "signedPayload") { () async throws(SignedDataError) in try await signatures.verifyNotification(jws) }
        let notification = verified.payload
        guard let uuid = notification.notificationUUID, InputRules.isText(uuid, maxLength: 200) else {
            throw ProblemError(status: 422, detail: "The signed payload has no notificationUUID.", extra: ["field": "signedPayload"])
        }
        var transaction: VerifiedSignedData<AppStoreTransactionV2>?
        if let info = notification.signedTransactionInfo {
            transaction = try await verify(part: "data.signedTransactionInfo") { () async throws(SignedDataError) in try await signatures.verifyTransaction(info) }
        }
        var renewal: VerifiedSignedData<AppStoreRenewalInfoV2>?
        if let info = notification.signedRenewalInfo {
            renewal = try await verify(part: "data.signedRenewalInfo") { () async throws(SignedDataError) in try await signatures.verifyRenewalInfo(info) }
        }
        let state: NotificationState = switch notification.disposition {
        case .record: .received
        case .ignore: .ignored
        }
        return StoredNotification(
            uuid: uuid, version: 2, type: notification.notificationType, subtype: notification.subtype,
            signedDate: notification.signedDate ?? verified.signedDate ?? Date(),
            environment: verified.environment.rawValue,
            originalTransactionID: transaction?.payload.transaction.originalTransactionID ?? renewal?.payload.renewal.originalTransactionID,
            transactionID: transaction?.payload.transaction.transactionID, signedPayload: jws,
            transactionInfo: transaction?.json, renewalInfo: renewal?.json, state: state)
    }

    /// The payload `verify` verifies (the notification or one of its `part`s): 401 when its signature or chain
    /// does not verify, 422 when it verifies but is for another app or environment or does not decode. The
    /// reason is logged.
    private func verify<Payload>(part: String, _ verify: () async throws(SignedDataError) -> VerifiedSignedData<Payload>) async throws -> VerifiedSignedData<Payload> {
        do {
            return try await verify()
        } catch {
            Log.warning("app_store_notification_refused", ["part": part, "status": error.status.rawValue, "reason": error.reason])
            if error.isAuthenticityFailure {
                throw ProblemError(status: 401, detail: "The signed payload (\(part)) is not signed by a trusted App Store certificate chain.",
                                   extra: ["field": "signedPayload"])
            }
            let at = error.field.map { "\(part): \($0)" } ?? part
            throw ProblemError(status: 422, detail: "The signed payload (\(at)) does not decode or is for another app or environment.",
                               extra: ["field": "signedPayload"])
        }
    }
}
