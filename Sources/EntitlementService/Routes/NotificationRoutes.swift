import AppStore
import ServiceRuntime
import EntitlementModel
import Foundation

/// `POST /v1/notifications/app-store`: App Store Server Notifications.
///
/// Version 1 notifications carry the shared secret as `password` (checked in constant time) and Apple's
/// `unified_receipt`. Version 2 notifications are one `signedPayload`, a JWS whose certificate chain must lead
/// to a trusted root (`SignedPayloadVerifier`); its signed transaction and renewal info are verified the same
/// way, and its `bundleId` must be `APPLE_BUNDLE_ID` when that is configured. Either way the transactions and
/// renewal info are recorded for purchases that already have an owner, so refunds, renewals and cancellations
/// show up without waiting for the renewal refresher; a purchase nobody owns yet is left for the receipt its
/// buyer posts, and a notification without a transaction (`TEST`, summaries) is only logged.
///
/// Answers: 200 received; 400 not a JSON object or an undecodable V1 body; 401 a wrong V1 password or a V2
/// signature that does not verify; 422 a verified V2 payload that does not decode or is for another app.
@Loop
struct NotificationRoutes {
    let sharedSecret: String?
    let bundleID: String?
    let signatures: SignedPayloadVerifier
    let db: PostgresPool
    let recorder: PurchaseRecorder
    let catalog: CatalogCache

    func register(on router: Router) {
        router.post("/v1/notifications/app-store") { try await receive($0) }
    }

    private func receive(_ request: HTTPRequest) async throws -> HTTPResponse {
        guard String(validating: request.body, as: UTF8.self) != nil,
              let object = try? JSONSerialization.jsonObject(with: Data(request.body)) as? [String: Any] else {
            throw ProblemError.badRequest("The body must be a JSON object.")
        }
        if let signedPayload = object["signedPayload"] {
            guard let jws = signedPayload as? String else {
                throw ProblemError.badRequest("signedPayload must be a string (a compact JWS).", field: "signedPayload")
            }
            return try await receiveSigned(jws)
        }
        let notification: AppStoreNotificationV1
        do {
            notification = try AppStoreNotificationV1(jsonData: Data(request.body))
        } catch {
            throw ProblemError.badRequest("The notification does not decode: \(error.path).", field: error.path)
        }
        guard let sharedSecret, let password = notification.password,
              APIKeys.constantTimeEqual(Array(password.utf8), Array(sharedSecret.utf8)) else {
            throw ProblemError(status: 401, detail: "The notification's password is not this app's shared secret.", extra: ["field": "password"])
        }
        let transactions = notification.transactions()
        let environment = notification.environment ?? .production
        let owned = try await recordOwned(transactions, renewals: notification.renewalInfo(), latestReceipt: notification.latestReceipt,
                                          appleStatus: notification.unifiedReceiptStatus ?? 0, environment: environment)
        Log.info("app_store_notification", ["type": notification.notificationType, "environment": environment.rawValue,
                                             "transactions": transactions.count, "owned": owned])
        return .json(["status": "received"])
    }

    /// A version 2 notification: verified, decoded, checked against the bundle id, then recorded.
    private func receiveSigned(_ jws: String) async throws -> HTTPResponse {
        let notification = try verified(jws, part: "signedPayload", as: AppStoreNotificationV2.init(jsonData:))
        try checkBundle(notification.bundleID, part: "data.bundleId")
        var transactions: [StoreTransaction] = []
        var environment = notification.environment
        var productType: String?
        if let info = notification.signedTransactionInfo {
            let signed = try verified(info, part: "data.signedTransactionInfo", as: AppStoreTransactionV2.init(jsonData:))
            try checkBundle(signed.bundleID, part: "data.signedTransactionInfo.bundleId")
            transactions = [signed.transaction]
            environment = environment ?? signed.environment
            productType = signed.productType
        }
        let renewals = try notification.signedRenewalInfo.map {
            [try verified($0, part: "data.signedRenewalInfo", as: AppStoreRenewalInfoV2.init(jsonData:)).renewal]
        } ?? []
        let recordedEnvironment = environment ?? .production
        let owned = try await recordOwned(transactions, renewals: renewals, latestReceipt: nil, appleStatus: 0, environment: recordedEnvironment)
        Log.info("app_store_notification", ["type": notification.notificationType, "subtype": notification.subtype,
                                             "uuid": notification.notificationUUID, "environment": recordedEnvironment.rawValue,
                                             "product_type": productType, "transactions": transactions.count, "owned": owned])
        return .json(["status": "received"])
    }

    /// The payload of `jws` (the notification or one of its parts) decoded by `decode`: 401 when the
    /// signature or chain does not verify, 422 when the verified payload does not decode. The reason is logged.
    private func verified<Payload>(_ jws: String, part: String, as decode: (Data) throws(AppStoreDecodingError) -> Payload) throws -> Payload {
        let payload: Data
        do {
            payload = try signatures.verify(jws)
        } catch {
            Log.warning("app_store_notification_refused", ["part": part, "reason": error.reason])
            throw ProblemError(status: 401, detail: "The signed payload (\(part)) is not signed by a trusted App Store certificate chain.",
                               extra: ["field": "signedPayload"])
        }
        do {
            return try decode(payload)
        } catch {
            Log.warning("app_store_notification_undecodable", ["part": part, "reason": error.description])
            let at = error.path.isEmpty ? part : "\(part): \(error.path)"
            throw ProblemError(status: 422, detail: "The signed payload verifies but does not decode at \(at).", extra: ["field": "signedPayload"])
        }
    }

    /// 422 when a bundle id is configured and the verified payload names another app (or none).
    private func checkBundle(_ payloadBundleID: String?, part: String) throws {
        guard let bundleID, payloadBundleID != bundleID else { return }
        Log.warning("app_store_notification_other_app", ["part": part, "bundle_id": payloadBundleID])
        throw ProblemError(status: 422, detail: "The signed payload is for another app (\(part) is not this service's bundle id).",
                           extra: ["field": "signedPayload"])
    }

    /// Records `transactions` (and the renewal info of their subscriptions) for each purchase that already has
    /// an owner, as that owner's; returns how many of their original transactions were owned.
    private func recordOwned(_ transactions: [StoreTransaction], renewals: [RenewalInfo], latestReceipt: String?, appleStatus: Int,
                             environment: StoreEnvironment) async throws -> Int {
        let ids = Set(transactions.map(\.originalTransactionID))
        guard !ids.isEmpty else { return 0 }
        let owners = try await OwnerStore().owners(of: ids.sorted(), on: db)
        let current = try await catalog.current()
        for (owner, owned) in Dictionary(grouping: transactions.filter { owners[$0.originalTransactionID] != nil }, by: { owners[$0.originalTransactionID]! }) {
            let chains = Set(owned.map(\.originalTransactionID))
            _ = try await recorder.record(
                transactions: owned, renewals: renewals.filter { chains.contains($0.originalTransactionID) },
                latestReceipt: latestReceipt, appleStatus: appleStatus, environment: environment, catalog: current,
                context: .init(poster: owner, movesOwnership: false, actor: "app-store-notification", claim: nil, orderID: nil))
        }
        return owners.count
    }
}
