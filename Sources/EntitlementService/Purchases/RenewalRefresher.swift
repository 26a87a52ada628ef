import AppStore
import ServiceRuntime
import EntitlementModel
import Foundation

/// Looks again at each auto-renewable subscription around its expiry and during grace or billing retry
/// (`RefreshSchedule`), so renewals, cancellations, refunds and upgrades show up without a client: with an App
/// Store Server API key through Get All Subscription Statuses (for subscriptions recorded by any path), else by
/// re-verifying the latest receipt. Due rows are claimed with `FOR UPDATE SKIP LOCKED`, so any number of
/// instances cooperate; an Apple outage or rate limit defers the row (to Apple's `Retry-After` when given).
@Loop
enum RenewalRefresher {
    static let batchSize = 16

    static func make(service: ReceiptService, serverAPI: ServerAPIClient?, intervalMs: UInt64) -> PeriodicWorker {
        PeriodicWorker(name: "renewal-refresher", intervalMs: intervalMs) { try await refreshDue(service: service, serverAPI: serverAPI) }
    }

    /// One pass: claims up to `batchSize` due subscriptions and refreshes them concurrently; true when the
    /// batch was full (more may be due). A database failure is thrown to the worker, which logs the change of state.
    static func refreshDue(service: ReceiptService, serverAPI: ServerAPIClient? = nil) async throws -> Bool {
        let due = try await SubscriptionStore().claimDue(limit: batchSize, lease: service.lease, withoutReceipt: serverAPI != nil, on: service.db)
        let refreshes = due.map { subscription in
            Task { @Loop in
                if let serverAPI { await refresh(subscription, serverAPI: serverAPI, service: service) } else { await refresh(subscription, service: service) }
            }
        }
        for refresh in refreshes { await refresh.value }
        return due.count == batchSize
    }

    /// Get All Subscription Statuses for the subscription, its latest transaction and renewal info recorded
    /// for its owner.
    private static func refresh(_ due: DueRefresh, serverAPI: ServerAPIClient, service: ReceiptService) async {
        let id = due.originalTransactionID
        guard let owner = due.owner else { return }
        do {
            let result = await serverAPI.subscriptionStatuses(id, firstEnvironment: due.environment)
            switch result {
            case .answered(let statuses, let environment):
                let mine = statuses.filter { ($0.originalTransactionID ?? $0.transaction?.payload.transaction.originalTransactionID) == id }
                _ = try await service.recorder.record(
                    transactions: mine.compactMap(\.transaction?.payload.transaction), renewals: mine.compactMap(\.renewalInfo?.payload.renewal),
                    latestReceipt: nil, appleStatus: 0, environment: environment, catalog: try await service.catalog.current(),
                    context: .init(poster: owner, movesOwnership: false, actor: "renewal-refresher", claim: nil, orderID: nil))
                if mine.isEmpty { try await SubscriptionStore().stopRefreshing(id, on: service.db) }
                Log.info("subscription_refreshed", ["original_transaction_id": id, "environment": environment.rawValue, "source": "server_api"])
            case .notFound:
                try await SubscriptionStore().stopRefreshing(id, on: service.db)
                Log.warning("subscription_refresh_unknown", ["original_transaction_id": id])
            case .retryLater, .rateLimited, .configurationError, .rejected, .unverified:
                let backoff = service.retry.randomDelayMs(attempt: due.attempts)
                let until: Date? = switch result {
                case .retryLater(let until, _): until
                case .rateLimited(let until): until
                default: nil
                }
                let delay = max(backoff, Int((until?.timeIntervalSinceNow ?? 0) * 1_000))
                try await SubscriptionStore().deferRefresh(id, by: .milliseconds(delay), on: service.db)
                Log.warning("subscription_refresh_deferred", ["original_transaction_id": id, "detail": String(describing: result), "retry_in_ms": delay])
            }
        } catch {
            Log.error("subscription_refresh_failed", ["error": String(describing: error)])
        }
    }

    private static func refresh(_ due: DueRefresh, service: ReceiptService) async {
        let id = due.originalTransactionID
        guard let owner = due.owner, let receipt = due.latestReceipt else { return }
        do {
            switch await service.verifier.verify(receiptData: receipt, firstEnvironment: due.environment) {
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
