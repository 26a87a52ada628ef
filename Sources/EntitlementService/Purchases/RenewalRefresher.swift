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
    /// Refreshes one process keeps in flight.
    static let batchSize = 16
    /// How long one pass goes on claiming; it then lets its refreshes finish, so a stop waits for at most this
    /// and one call.
    static let passDuration: TimeInterval = 10

    static func make(service: ReceiptService, serverAPI: ServerAPIClient?, intervalMs: UInt64) -> PeriodicWorker {
        PeriodicWorker(name: "renewal-refresher", intervalMs: intervalMs) { try await refreshDue(service: service, serverAPI: serverAPI) }
    }

    /// One pass: keeps up to `batchSize` due subscriptions refreshing, claiming more whenever half of them have
    /// finished (so one slow call, retrying through Apple's faults, never holds the others back), until nothing
    /// more is due, Apple's rate limit holds every request beyond a call's time (the rest wait for the next
    /// pass rather than each being claimed and put off), or `passDuration` has passed. True when it stopped
    /// with more possibly due. A database failure is thrown to the worker, which logs the change of state.
    static func refreshDue(service: ReceiptService, serverAPI: ServerAPIClient? = nil) async throws -> Bool {
        let ends = Date().addingTimeInterval(passDuration)
        // Each refresh reports its end here: true when Apple's rate limit put it off.
        let (finished, report) = AsyncStream.makeStream(of: Bool.self)
        var ended = finished.makeAsyncIterator()
        var inFlight = 0, claiming = true, rateLimited = false
        var failure: (any Error)?
        while true {
            if claiming && inFlight <= batchSize / 2 {
                let limit = batchSize - inFlight
                do {
                    let due = try await SubscriptionStore().claimDue(limit: limit, lease: service.lease, withoutReceipt: serverAPI != nil, on: service.db)
                    for subscription in due {
                        Task.onLoop {
                            if let serverAPI {
                                report.yield(await refresh(subscription, serverAPI: serverAPI, service: service))
                            } else {
                                report.yield(await refresh(subscription, service: service))
                            }
                        }
                    }
                    inFlight += due.count
                    claiming = due.count == limit && Date() < ends
                } catch {
                    // The refreshes under way finish first.
                    failure = error
                    claiming = false
                }
            }
            guard inFlight > 0, let limited = await ended.next() else { break }
            inFlight -= 1
            if limited {
                rateLimited = true
                claiming = false
            }
        }
        if let failure { throw failure }
        return !rateLimited && Date() >= ends
    }

    /// Get All Subscription Statuses for the subscription, its latest transaction and renewal info recorded
    /// for its owner. True when Apple's rate limit put it off.
    private static func refresh(_ due: DueRefresh, serverAPI: ServerAPIClient, service: ReceiptService) async -> Bool {
        let id = due.originalTransactionID
        guard let owner = due.owner else { return false }
        do {
            guard SignedDataEnvironment.isAppStoreID(id) else {
                // An Xcode or LocalTesting subscription (scheduled before such were left out): no App Store knows it.
                try await SubscriptionStore().stopRefreshing(id, on: service.db)
                return false
            }
            let result = await serverAPI.subscriptionStatuses(id, firstEnvironment: due.environment)
            switch result {
            case .answered(let statuses, let environment):
                let mine = statuses.filter { ($0.originalTransactionID ?? $0.transaction?.payload.transaction.originalTransactionID) == id }
                _ = try await service.recorder.record(
                    transactions: mine.compactMap(\.transaction?.payload.transaction), renewals: mine.compactMap(\.renewalInfo?.payload.renewal),
                    latestReceipt: nil, appleStatus: 0, environment: environment,
                    context: .init(poster: owner, movesOwnership: false, actor: "renewal-refresher", claim: nil, orderID: nil))
                if mine.isEmpty { try await SubscriptionStore().stopRefreshing(id, on: service.db) }
                Log.info("subscription_refreshed", ["original_transaction_id": id, "environment": environment.rawValue, "source": "server_api"])
            case .notFound:
                try await SubscriptionStore().stopRefreshing(id, on: service.db)
                Log.warning("subscription_refresh_unknown", ["original_transaction_id": id])
            case .retryLater, .rateLimited, .configurationError, .rejected, .unverified:
                let backoff = service.retry.randomDelayMs(attempt: due.attempts)
                let until: Date? = switch result {
                case .retryLater(let until, _, _): until
                case .rateLimited(let until, _): until
                default: nil
                }
                let delay = max(backoff, Int((until?.timeIntervalSinceNow ?? 0) * 1_000))
                try await SubscriptionStore().deferRefresh(id, by: .milliseconds(delay), on: service.db)
                Log.warning("subscription_refresh_deferred", ["original_transaction_id": id, "detail": String(describing: result), "retry_in_ms": delay])
                if case .rateLimited = result { return true }
            }
        } catch {
            Log.error("subscription_refresh_failed", ["error": String(describing: error)])
        }
        return false
    }

    /// Re-verifies the subscription's latest receipt for its owner; false (verifyReceipt has no shared rate limit).
    private static func refresh(_ due: DueRefresh, service: ReceiptService) async -> Bool {
        let id = due.originalTransactionID
        guard let owner = due.owner, let receipt = due.latestReceipt else { return false }
        do {
            switch await service.verifier.verify(receiptData: receipt, firstEnvironment: due.environment) {
            case .verified(let response, let answered):
                _ = try await service.recorder.record(
                    response, environment: answered,
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
        return false
    }
}
