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
        PeriodicWorker(name: "renewal-refresher", intervalMs: intervalMs) {
            let due = try await service.db.query("""
                WITH due AS (
                    SELECT original_transaction_id FROM subscriptions
                     WHERE next_refresh_at <= now() AND latest_receipt IS NOT NULL
                     ORDER BY next_refresh_at LIMIT $1
                     FOR UPDATE SKIP LOCKED)
                UPDATE subscriptions s
                   SET next_refresh_at = now() + make_interval(secs => $2::double precision / 1000),
                       refresh_attempts = s.refresh_attempts + 1
                  FROM due WHERE s.original_transaction_id = due.original_transaction_id
                RETURNING s.original_transaction_id, s.latest_receipt, s.environment, s.refresh_attempts,
                          (SELECT user_id FROM purchase_owners o WHERE o.original_transaction_id = s.original_transaction_id) AS owner
                """, [batchSize, service.leaseMs]).rows
            let refreshes = due.map { row in Task { @Loop in await refresh(row, service: service) } }
            for refresh in refreshes { await refresh.value }
            return due.count == batchSize
        }
    }

    private static func refresh(_ row: PostgresRow, service: ReceiptService) async {
        do {
            let id = try row.string("original_transaction_id")
            let receipt = try row.string("latest_receipt")
            let environment = StoreEnvironment(rawValue: try row.string("environment")) ?? .production
            let attempts = try row.int("refresh_attempts")
            guard let owner = try row.optionalString("owner") else { return }
            switch await service.verifier.verify(receiptData: receipt, firstEnvironment: environment) {
            case .verified(let response, let answered):
                _ = try await service.recorder.record(
                    response, environment: answered, catalog: try await service.catalog.current(),
                    context: .init(poster: owner, movesOwnership: false, actor: "renewal-refresher", verificationID: nil, orderID: nil))
                Log.info("subscription_refreshed", ["original_transaction_id": id, "environment": answered.rawValue])
            case .rejected(let status, let detail):
                _ = try await service.db.query(
                    "UPDATE subscriptions SET next_refresh_at = NULL WHERE original_transaction_id = $1", [id])
                Log.warning("subscription_refresh_rejected", ["original_transaction_id": id, "apple_status": status, "detail": detail])
            case .configurationError(let status, let detail), .retryLater(let status, let detail):
                let delay = service.retry.randomDelayMs(attempt: attempts)
                _ = try await service.db.query("""
                    UPDATE subscriptions SET next_refresh_at = now() + make_interval(secs => $2::double precision / 1000)
                     WHERE original_transaction_id = $1
                    """, [id, delay])
                Log.warning("subscription_refresh_deferred", ["original_transaction_id": id, "apple_status": status, "detail": detail, "retry_in_ms": delay])
            }
        } catch {
            Log.error("subscription_refresh_failed", ["error": String(describing: error)])
        }
    }
}
