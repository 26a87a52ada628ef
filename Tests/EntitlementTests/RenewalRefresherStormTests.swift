import EntitlementModel
import Foundation
import Testing
@testable import AppStore
@testable import EntitlementService
@testable import FakeAppStore
@testable import ServiceRuntime

/// The renewal refresher through the App Store Server API in a storm: many subscriptions renewed at the fake
/// (a quarter also with auto-renew turned off) while the service knows only their first, lapsed period, then
/// refreshed by the running service (its `RenewalRefresher` worker, real PostgreSQL, the fake over loopback
/// HTTP) while the fake answers half the requests with a fault (`5000001`, HTTP 500, HTTP 503, a delay past
/// the client's timeout, a dropped connection), limits requests to 30 a second per endpoint (429 with
/// `Retry-After` the next second), and sends two long 429s (2.5 s, and 12 s: beyond a call's 10 s).
///
/// At the end every subscription reflects the fake exactly once: its row has the fake's latest expiry and
/// auto-renew state and is scheduled normally, both transactions are recorded once, each user has exactly one
/// new event, and no request came during a 429's hold.
///
/// `STORM_SUBSCRIPTIONS` sets the count (the normal run uses `defaultCount`, about a minute on the test
/// machine; `STORM_SUBSCRIPTIONS=10000` is the full storm of issue 11, run by hand).
@Suite(.serialized) struct RenewalRefresherStormTests {
    static let defaultCount = 300
    static let count = ProcessInfo.processInfo.environment["STORM_SUBSCRIPTIONS"].flatMap(Int.init) ?? defaultCount
    static let monthly = "com.example.premium.monthly"
    static let dayMs: Int64 = 86_400_000

    @Test(.timeLimit(.minutes(40))) @Loop func everySubscriptionReflectsTheFakeOnceThrough429StormsAndFaults() async throws {
        try await ServiceHarness.run(["APPLE_TIMEOUT_MS": "1000"], serverAPI: true) { service in
            let count = Self.count
            let originals = try await seed(count, service)
            let expected = try renewAtTheFake(originals, service.fake)
            let lastSeedEvent = try await service.sql("SELECT coalesce(max(position), 0) AS p FROM webhook_events").first!.int("p")

            service.fake.serverAPI.configure(FakeServerAPIState.Settings(
                ratePerSecond: 30, faultRate: 0.5, faultSeed: 11,
                faultMix: [.init(errorCode: 5_000_001), .init(status: 500), .init(status: 503), .init(delayMs: 1_500), .init(drop: true)]))
            let started = Date()
            _ = try await service.sql("UPDATE subscriptions SET next_refresh_at = now()")

            // Poll until every subscription shows its renewal; the long 429s go out as the refreshes progress.
            var storms: [(atRefreshed: Int, retryAfterMs: Int)] = [(count / 4, 2_500), (count / 2, 12_000)]
            var refreshed = 0
            let deadline = Date().addingTimeInterval(Double(count) * 0.2 + 120)
            while refreshed < count && Date() < deadline {
                refreshed = try await refreshedCount(service)
                if let storm = storms.first, refreshed >= storm.atRefreshed {
                    storms.removeFirst()
                    service.fake.serverAPI.setScenario([.init(status: 429, retryAfterMs: storm.retryAfterMs)], for: .init())
                }
                await LoopTimer.sleep(milliseconds: 200)
            }
            let wall = Date().timeIntervalSince(started)
            let tally = service.fake.serverAPI.tally
            let requests = service.fake.serverAPI.counts.values.reduce(0, +)
            print("storm: \(count) subscriptions refreshed in \(String(format: "%.1f", wall)) s; \(requests) requests, statuses \(tally.statuses.sorted { $0.key < $1.key }), faults \(tally.faults) (dropped \(tally.dropped)), requests during a 429 hold \(tally.early), longest Retry-After wait honoured \(tally.longestHonouredMs) ms")
            #expect(refreshed == count, "only \(refreshed) of \(count) subscriptions were refreshed in time")

            // Each row is the fake's state and is scheduled as an active subscription is.
            let rows = try await service.sql("""
                SELECT original_transaction_id, latest_expires_date, will_renew, next_refresh_at > now() + interval '1 hour' AS scheduled
                  FROM subscriptions
                """)
            #expect(rows.count == count)
            var mismatches: [String] = []
            for row in rows {
                let id = try row.string("original_transaction_id")
                guard let want = expected[id] else { mismatches.append("\(id): not the fake's"); continue }
                let expires = Int64((try row.date("latest_expires_date").timeIntervalSince1970 * 1_000).rounded())
                let willRenew = try row.bool("will_renew"), scheduled = try row.bool("scheduled")
                if expires != want.expiresMs || willRenew != want.willRenew || !scheduled {
                    mismatches.append("\(id): expires \(expires) will_renew \(willRenew) scheduled \(scheduled), the fake's \(want)")
                }
            }
            #expect(mismatches.isEmpty, "\(mismatches.count) rows differ from the fake, e.g. \(mismatches.prefix(3))")

            // Both transactions of every subscription, once each.
            let transactions = try await service.sql("""
                SELECT count(*) AS n, count(DISTINCT transaction_id) AS distinct_ids FROM app_store_transactions
                """).first!
            #expect(try transactions.int("n") == 2 * count)
            #expect(try transactions.int("distinct_ids") == 2 * count)
            let perOriginal = try await service.sql("""
                SELECT count(*) AS n FROM (SELECT original_transaction_id FROM app_store_transactions
                                            GROUP BY original_transaction_id HAVING count(*) <> 2) AS odd
                """).first!.int("n")
            #expect(perOriginal == 0)

            // One new event per user: the renewal, never twice.
            let events = try await service.sql("""
                SELECT count(*) AS n, count(DISTINCT user_id) AS users FROM webhook_events WHERE position > $1
                """, [lastSeedEvent]).first!
            #expect(try events.int("n") == count)
            #expect(try events.int("users") == count)

            #expect(tally.early == 0, "requests came during a 429's hold")
            #expect(tally.longestHonouredMs >= 2_000, "the long 429s were not held to")
            #expect(tally.faults > 0 && (tally.statuses[429] ?? 0) > 0)
        }
    }

    /// One call held at Apple does not hold the refreshes after it back: with 20 subscriptions due and the first
    /// request answered only after 8 s (ample for the others on a loaded 2-core machine), the other 19 are refreshed
    /// while it waits.
    @Test(.timeLimit(.minutes(2))) @Loop func aSlowCallDoesNotHoldTheOtherRefreshesBack() async throws {
        try await ServiceHarness.run(["APPLE_TIMEOUT_MS": "10000"], serverAPI: true) { service in
            _ = try renewAtTheFake(try await seed(20, service), service.fake)
            service.fake.serverAPI.setScenario([.init(delayMs: 8_000)], for: .init(endpoint: .subscriptionStatuses))
            _ = try await service.sql("UPDATE subscriptions SET next_refresh_at = now()")
            #expect(try await eventually(timeout: 20, everyMs: 50) {
                let refreshed = try await refreshedCount(service)
                let statuses = service.fake.serverAPI.received.filter { $0.endpoint == .subscriptionStatuses }
                return refreshed == 19 && statuses.first?.status == nil
            }, "the others were refreshed only after the slow call")
            #expect(try await eventually(timeout: 20, everyMs: 50) { try await refreshedCount(service) == 20 })
        }
    }

    /// Subscriptions whose renewal the service has recorded.
    @Loop private func refreshedCount(_ service: ServiceHarness) async throws -> Int {
        try await service.sql("SELECT count(*) AS n FROM subscriptions WHERE latest_expires_date > now() AND refresh_attempts = 0").first!.int("n")
    }

    /// `count` monthly subscriptions bought 31 days ago at the fake (one customer each) and recorded for one user
    /// each, as a first purchase whose period has ended; their original transaction ids.
    @Loop private func seed(_ count: Int, _ service: ServiceHarness) async throws -> [String] {
        let now = Date().milliseconds
        let recorder = service.application.receipts.recorder
        var originals: [String] = []
        for start in stride(from: 0, to: count, by: 8) {
            var recordings: [Task<Void, any Error>] = []
            for index in start..<min(count, start + 8) {
                var purchase = FakeStoreKit.Purchase()
                purchase.productID = Self.monthly
                purchase.type = .autoRenewable
                purchase.environment = .production
                purchase.purchaseDate = now - 31 * Self.dayMs - 3_600_000
                purchase.customer = "storm-customer-\(index)"
                let id = try service.fake.storeKit.purchase(purchase, now: now).transactionID
                originals.append(id)
                let transaction = try AppStoreTransactionV2(
                    jsonData: Data(FakeStoreKit.payload(service.fake.storeKit.transactions[id]!, signedDate: now).jsonText.utf8)).transaction
                let renewal = try AppStoreRenewalInfoV2(
                    jsonData: Data(try #require(service.fake.storeKit.renewalPayload(id, signedDate: now)).jsonText.utf8)).renewal
                recordings.append(Task { @Loop in
                    _ = try await recorder.record(
                        transactions: [transaction], renewals: [renewal], latestReceipt: nil, appleStatus: 0, environment: .production,
                        context: .init(poster: "storm-user-\(index)", movesOwnership: true, actor: "storm-seed", claim: nil, orderID: nil))
                })
            }
            for recording in recordings { try await recording.value }
        }
        return originals
    }

    /// What the fake says after renewing each subscription for 30 days from the end of its first period, and
    /// turning auto-renew off for every fourth: the latest expiry (ms) and auto-renew state by original id.
    @Loop private func renewAtTheFake(_ originals: [String], _ fake: FakeAppStore) throws -> [String: (expiresMs: Int64, willRenew: Bool)] {
        let now = Date().milliseconds
        var expected: [String: (expiresMs: Int64, willRenew: Bool)] = [:]
        for (index, original) in originals.enumerated() {
            let ended = try #require(fake.storeKit.chain(original).last?.expiresDate)
            #expect(ended < now, "the first period has ended")
            _ = try fake.storeKit.renew(original, purchaseDate: ended, expiresDate: ended + 30 * Self.dayMs, now: now)
            if index % 4 == 0 { _ = try fake.storeKit.setAutoRenew(original, false) }
            expected[original] = (ended + 30 * Self.dayMs, index % 4 != 0)
        }
        return expected
    }
}
