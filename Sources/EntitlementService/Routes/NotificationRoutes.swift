import EntitlementModel
import Foundation

/// `POST /v1/notifications/app-store`: App Store Server Notifications.
///
/// Version 1 notifications carry the shared secret as `password` (checked in constant time) and Apple's
/// `unified_receipt`; its transactions and renewal info are recorded for purchases that already have an owner,
/// so refunds, renewals and cancellations show up without waiting for the renewal refresher. A purchase nobody
/// owns yet is left for the receipt its buyer posts. Version 2 (`signedPayload`) is refused with 422 until its
/// signature chain is verified; Apple then retries it, and the renewal refresher covers the gap.
@Loop
struct NotificationRoutes {
    let sharedSecret: String?
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
        if object["signedPayload"] != nil {
            throw ProblemError(status: 422, detail: "Signed (version 2) notifications are not accepted yet; send version 1 notifications.",
                               extra: ["field": "signedPayload"])
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
        let ids = Set(transactions.map(\.originalTransactionID))
        var owners: [String: String] = [:]
        if !ids.isEmpty {
            for row in try await db.query("""
                SELECT original_transaction_id, user_id FROM purchase_owners
                 WHERE original_transaction_id IN (SELECT jsonb_array_elements_text($1::jsonb))
                """, [try PostgresJSON(encoding: ids.sorted())]).rows {
                owners[try row.string("original_transaction_id")] = try row.string("user_id")
            }
        }
        let environment = notification.environment ?? .production
        let renewals = notification.renewalInfo()
        let current = try await catalog.current()
        for (owner, owned) in Dictionary(grouping: transactions.filter { owners[$0.originalTransactionID] != nil }, by: { owners[$0.originalTransactionID]! }) {
            let chains = Set(owned.map(\.originalTransactionID))
            _ = try await recorder.record(
                transactions: owned, renewals: renewals.filter { chains.contains($0.originalTransactionID) },
                latestReceipt: notification.latestReceipt, appleStatus: notification.unifiedReceiptStatus ?? 0,
                environment: environment, catalog: current,
                context: .init(poster: owner, actor: "app-store-notification", verificationID: nil, orderID: nil))
        }
        Log.info("app_store_notification", ["type": notification.notificationType, "environment": environment.rawValue,
                                             "transactions": transactions.count, "owned": owners.count])
        return .json(["status": "received"])
    }
}
