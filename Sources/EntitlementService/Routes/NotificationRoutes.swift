import AppStore
import ServiceRuntime
import EntitlementModel
import Foundation

/// `POST /v1/notifications/app-store`: App Store Server Notifications.
///
/// Version 1 notifications carry the shared secret as `password` (checked in constant time) and Apple's
/// `unified_receipt`. Version 2 notifications are one `signedPayload`, verified with Apple's rules
/// (`SignedDataVerifier`: chain, signature, bundle id, app Apple ID, environment), as are its signed
/// transaction and renewal info. Either way the transactions and
/// renewal info are recorded for purchases that already have an owner, so refunds, renewals and cancellations
/// show up without waiting for the renewal refresher; a purchase nobody owns yet is left for the receipt its
/// buyer posts, and a notification without a transaction (`TEST`, summaries) is only logged.
///
/// Answers: 200 received; 400 not a JSON object or an undecodable V1 body; 401 a wrong V1 password or a V2
/// signature or chain that does not verify; 422 a verified V2 payload that does not decode or is for another
/// app or environment.
@Loop
struct NotificationRoutes {
    let sharedSecret: String?
    let signatures: SignedDataVerifier
    let db: PostgresPool
    let recorder: PurchaseRecorder
    let catalog: CatalogCache

    /// Registered on the router itself: Apple presents no key, the notification proves itself.
    /// Registers the route on `apple`: the `/v1` group of Apple's calls (no bearer key; its changes visible
    /// on this instance once answered, as for every write).
    func register(on apple: RouterGroup) {
        apple.post("/notifications/app-store") { request, _ in try await receive(request) }
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
        let notification = try await verified(part: "signedPayload") { () async throws(SignedDataError) in try await signatures.verifyNotification(jws) }
        var transactions: [StoreTransaction] = []
        var environment = notification.environment
        var productType: String?
        if let info = notification.signedTransactionInfo {
            let signed = try await verified(part: "data.signedTransactionInfo") { () async throws(SignedDataError) in try await signatures.verifyTransaction(info) }
            transactions = [signed.transaction]
            environment = environment ?? signed.environment
            productType = signed.productType
        }
        var renewals: [RenewalInfo] = []
        if let info = notification.signedRenewalInfo {
            renewals = [try await verified(part: "data.signedRenewalInfo") { () async throws(SignedDataError) in try await signatures.verifyRenewalInfo(info) }.renewal]
        }
        let recordedEnvironment = environment ?? .production
        let owned = try await recordOwned(transactions, renewals: renewals, latestReceipt: nil, appleStatus: 0, environment: recordedEnvironment)
        Log.info("app_store_notification", ["type": notification.notificationType, "subtype": notification.subtype,
                                             "uuid": notification.notificationUUID, "environment": recordedEnvironment.rawValue,
                                             "product_type": productType, "transactions": transactions.count, "owned": owned])
        return .json(["status": "received"])
    }

    /// The payload `verify` verifies (the notification or one of its `part`s): 401 when its signature or chain
    /// does not verify, 422 when it verifies but is for another app or environment or does not decode. The
    /// reason is logged.
    private func verified<Payload>(part: String, _ verify: () async throws(SignedDataError) -> VerifiedSignedData<Payload>) async throws -> Payload {
        do {
            return try await verify().payload
        } catch {
            Log.warning("app_store_notification_refused", ["part": part, "status": error.status.rawValue, "reason": error.reason])
            switch error.status {
            case _ where error.isAuthenticityFailure:
                throw ProblemError(status: 401, detail: "The signed payload (\(part)) is not signed by a trusted App Store certificate chain.",
                                   extra: ["field": "signedPayload"])
            case .undecodablePayload:
                let at = error.field.map { "\(part): \($0)" } ?? part
                throw ProblemError(status: 422, detail: "The signed payload verifies but does not decode at \(at).", extra: ["field": "signedPayload"])
            default:
                throw ProblemError(status: 422, detail: "The signed payload (\(part)) is for another app or environment.",
                                   extra: ["field": "signedPayload"])
            }
        }
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
