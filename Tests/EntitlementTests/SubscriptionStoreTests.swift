import Foundation
import Testing
@testable import EntitlementModel
@testable import EntitlementService
@testable import ServiceRuntime

/// How stored renewal state folds in what later recordings state, on a migrated database of its own.
@Suite struct SubscriptionStoreTests {
    /// A renewal state only assumed (signed transactions alone) follows the latest period whatever order the
    /// periods come in: an expired period first, then the current one, is renewing, as the current one alone
    /// would be. Once Apple's renewal state is stored, an assumption changes nothing.
    @Test @Loop func anAssumedRenewalStateFollowsTheLatestPeriodUntilApplesArrives() async throws {
        try await TestDatabase.withTemporaryDatabase { url in
            let pool = PostgresPool(conninfo: url, size: 2)
            _ = try await Migrator(pool: pool, directory: Migrator.defaultDirectory()).run()
            let store = SubscriptionStore(), now = Date()
            func stated(expiringIn seconds: TimeInterval) -> SubscriptionState {
                SubscriptionState(originalTransactionID: "1", productID: "monthly", latestExpiresDate: now.addingTimeInterval(seconds),
                                  nextRefreshAt: now, renewal: nil, assumedRenewing: seconds > 0, wantsStatus: true)
            }
            let willRenew = { @Loop in try await pool.query("SELECT will_renew FROM subscriptions").rows[0].bool("will_renew") }
            try await store.record([stated(expiringIn: -10 * 86_400)], latestReceipt: nil, environment: .production, on: pool)
            #expect(try await willRenew() == false)
            try await store.record([stated(expiringIn: 20 * 86_400)], latestReceipt: nil, environment: .production, on: pool)
            #expect(try await willRenew() == true)
            _ = try await pool.query("UPDATE subscriptions SET will_renew = false, renewal_signed_date = now()")
            try await store.record([stated(expiringIn: 50 * 86_400)], latestReceipt: nil, environment: .production, on: pool)
            #expect(try await willRenew() == false)
            await pool.close()
        }
    }
}
