import ServiceRuntime
import EntitlementModel
import Foundation

/// Re-verifies the latest receipt of each auto-renewable subscription around its expiry and during grace or
/// billing retry (`RefreshSchedule`), so renewals, cancellations and refunds show up without a client.
/// Due rows are claimed with `FOR UPDATE SKIP LOCKED`, so any number of instances cooperate.
@Loop
enum RenewalRefresher {
    static let batchSize = 16

    static func make(service: ReceiptService, intervalMs: UInt64) -> PeriodicWorker {
        PeriodicWorker(name: "renewal-refresher", intervalMs: intervalMs) { try await refreshDue(service: service) }
    }

    /// One pass: claims up to `batchSize` due subscriptions and re-verifies them concurrently; true when the
    /// batch was full (more may be due). A database failure is thrown to the worker, which logs the change of state.
    static func refreshDue(service: ReceiptService) async throws -> Bool {
        let due = try await SubscriptionStore().claimDue(limit: batchSize, lease: service.lease, on: service.db)
        let refreshes = due.map { subscription in Task { @Loop in await refresh(subscription, service: service) } }
        for refresh in refreshes { await refresh.value }
        return due.count == batchSize
    }

    private static func refresh(_ due: DueRefresh, service: ReceiptService) async {
        let id = due.originalTransactionID
        guard let owner = due.owner else { return }
        do {
            switch await service.verifier.verify(receiptData: due.latestReceipt, firstEnvironment: due.environment) {
            case .verified(let response, let answered):
                _ = try await service.recorder.record(
                    response, environment: answered, catalog: try await service.catalog.current(),
                    context: .init(poster: owner, movesOwnership: false, actor: "renewal-refresher", claim: nil, orderID: nil))
                Log.info("subscription_refreshed", ["original_transaction_id": id, "environment": answered.rawValue])
            case .rejected(let status, let detail):
                try await SubscriptionStore().stopRefreshing(id, on: service.db)
                Log.warning("subscription_refresh_rejected", ["original_transaction_id": id, "apple_status": status, "detail": detail])
            case .configurationError(let status, let detail), .retryLater(let status, let detail):
                let delay = service.retry.randomDelayMs(attempt: due.attempts)
                try await SubscriptionStore().deferRefresh(id, by: .milliseconds(delay), on: service.db)
                Log.warning("subscription_refresh_deferred", ["original_transaction_id": id, "apple_status": status, "detail": detail, "retry_in_ms": delay])
            }
        } catch {
            Log.error("subscription_refresh_failed", ["error": String(describing: error)])
        }
    }
}
