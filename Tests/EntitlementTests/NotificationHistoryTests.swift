import EntitlementModel
import Foundation
import Testing
@testable import EntitlementService
@testable import ServiceRuntime
@testable import FakeAppStore

/// Notification history recovery: notifications Apple sent while the service was stopped are fetched from Get
/// Notification History at start (both environments), stored and applied once through the notification route's
/// own path; later runs change nothing; a run Apple interrupts resumes at its page; runs are claimed by one
/// instance at a time.
@Suite(.serialized, .timeLimit(.minutes(3)))
struct NotificationHistoryTests {
    static let monthly = "com.example.premium.monthly"

    /// Another `Application` on the harness's database and fake (a restart of the service), with `overrides`.
    @Loop private static func startInstance(_ service: ServiceHarness, _ overrides: [String: String] = [:]) async throws -> (Application, Int) {
        let application = try await Application(
            configuration: try Configuration(environment: service.setupEnvironment.merging(overrides) { $1 }),
            migrationsDirectory: Migrator.defaultDirectory())
        return (application, try application.start())
    }

    /// `GET /v1/users/{user_id}/entitlements` of the instance on `port`.
    @Loop private static func entitlements(_ userID: String, port: Int) async throws -> [String: Any] {
        let text = RawHTTPClient.request("GET", "/v1/users/\(userID)/entitlements", headers: [("Authorization", "Bearer \(ServiceHarness.appKey)")])
        return try await RawHTTPClient.exchange(port: port, text, timeout: 20).json()
    }

    /// Requests of Get Notification History the fake received, per environment.
    @Loop private static func historyRequests(_ service: ServiceHarness) async throws -> (production: Int, sandbox: Int) {
        let counts = try await service.fakeCall("GET", "/control/server-api/requests").json()["counts"] as? [String: Int] ?? [:]
        return (counts["notification_history.Production"] ?? 0, counts["notification_history.Sandbox"] ?? 0)
    }

    /// Counts of what a notification applied twice would write twice.
    @Loop private static func footprint(_ service: ServiceHarness) async throws -> [Int] {
        let row = try await service.sql("""
            SELECT (SELECT count(*) FROM app_store_notifications)::int AS notifications, (SELECT count(*) FROM app_store_transactions)::int AS transactions,
                   (SELECT count(*) FROM consumable_ledger)::int AS ledger, (SELECT count(*) FROM webhook_events)::int AS events
            """)[0]
        return [try row.int("notifications"), try row.int("transactions"), try row.int("ledger"), try row.int("events")]
    }

    /// How many notifications are applied for `userID`.
    @Loop private static func appliedNotifications(_ service: ServiceHarness, _ userID: String) async throws -> Int {
        try await service.sql("SELECT count(*)::int AS n FROM app_store_notifications WHERE state = 'applied' AND user_id = $1", [userID])[0].int("n")
    }

    /// Whether every environment's run completed since `since` (nil: ever).
    @Loop private static func runsCompleted(_ service: ServiceHarness, since: Date? = nil) async throws -> Bool {
        try await service.sql("""
            SELECT 1 FROM notification_history_runs WHERE completed_at > coalesce($1, '-infinity'::timestamptz) AND claim_id IS NULL
            """, [since]).count == 2
    }

    /// Once the start's runs completed: 22 Sandbox notifications nobody received (two pages of history).
    @Loop private static func missTwoPagesOfNotifications(_ service: ServiceHarness) async throws {
        #expect(try await eventually(timeout: 20) { try await Self.runsCompleted(service) })
        let bought = try await service.fakeBuy(["product_id": .string(Self.monthly), "type": "auto_renewable", "environment": "Sandbox"])
        let transaction = try #require(bought["transaction_id"] as? String)
        let orders: [JSONValue] = (0..<22).map { _ in ["notification_type": "DID_RENEW", "transaction_id": .string(transaction)] }
        #expect(try await service.fakeCall("POST", "/control/storekit/notifications/batch", [
            "url": "http://127.0.0.1:1/v1/notifications/app-store", "notifications": .array(orders), "shuffle": false,
        ]).status == 200)
    }

    @Test @Loop func notificationsMissedWhileStoppedAreRecoveredAtStartOnce() async throws {
        try await ServiceHarness.run(serverAPI: true) { service in
            #expect(try await eventually(timeout: 20) { try await Self.runsCompleted(service) })
            let url = JSONValue.string("http://127.0.0.1:\(service.port)/v1/notifications/app-store")
            let token = try #require(try await service.request("GET", "/v1/users/hal/app-account-token").json()["app_account_token"] as? String)
            let bought = try await service.fakeBuy(["product_id": .string(Self.monthly), "type": "auto_renewable", "environment": "Production",
                                                    "app_account_token": .string(token), "notify": ["url": url]])
            let original = try #require(bought["original_transaction_id"] as? String)
            let before = try #require(try await service.entitlements("hal").entitlement("premium"))
            #expect(before["active"] as? Bool == true && before["will_renew"] as? Bool == true)

            // Stopped: Apple's deliveries fail, in both environments.
            await service.application.shutdown()
            let now = Int(Date().timeIntervalSince1970 * 1_000)
            try await service.fakeChange(original, "renew", ["purchase_date": .int(now - 1_000), "expires_date": .int(now + 40 * 86_400_000),
                                                             "notify": ["url": url]])
            try await service.fakeChange(original, "auto_renew_off", ["notify": ["url": url]])
            let coins = try await service.fakeBuy(["product_id": "com.example.coins.100", "type": "consumable", "environment": "Sandbox",
                                                   "app_account_token": .string(token), "notify": ["url": url]])
            #expect(coins["notification"] != nil)
            #expect(try await service.sql("SELECT 1 FROM app_store_notifications").count == 1)

            // Started again: history brings the three missed notifications in, applied for their owner.
            let (second, port) = try await Self.startInstance(service)
            #expect(try await eventually(timeout: 30) { try await Self.appliedNotifications(service, "hal") == 4 })
            #expect(try await eventually(timeout: 20) { try await Self.runsCompleted(service) })
            let after = try await Self.entitlements("hal", port: port)
            let premium = try #require(after.entitlement("premium"))
            #expect(premium["will_renew"] as? Bool == false && premium["active"] as? Bool == true)
            #expect((premium["expires_at"] as? String ?? "") > (before["expires_at"] as? String ?? "~"))
            #expect((after["consumables"] as? [String: Any])?["coins"] as? Int == 100)
            let environments = try await service.sql("SELECT environment FROM app_store_notifications GROUP BY environment ORDER BY 1")
            #expect(try environments.map { try $0.string("environment") } == ["Production", "Sandbox"])
            let recoveredFootprint = try await Self.footprint(service)
            await second.shutdown()

            // A second start, then runs every second: the same notifications again, nothing changes.
            let requests = try await Self.historyRequests(service)
            let started = Date()
            let (third, thirdPort) = try await Self.startInstance(service, ["NOTIFICATION_HISTORY_INTERVAL_S": "1"])
            let repeated = try await eventually(timeout: 30) {
                let now = try await Self.historyRequests(service)
                return now.production >= requests.production + 3 && now.sandbox >= requests.sandbox + 3
            }
            #expect(repeated)
            #expect(try await eventually(timeout: 20) { try await Self.runsCompleted(service, since: started) })
            let repeatedFootprint = try await Self.footprint(service)
            #expect(repeatedFootprint == recoveredFootprint)
            #expect((try await Self.entitlements("hal", port: thirdPort)["consumables"] as? [String: Any])?["coins"] as? Int == 100)
            await third.shutdown()
        }
    }

    /// A notification of the history whose signed payload is refused is left out and the run goes on: the
    /// good notifications around it on the same page are stored and applied, and the run completes, so one bad
    /// notification never stops the history at its page.
    @Test @Loop func aRefusedNotificationIsLeftOutAndTheRunCompletes() async throws {
        try await ServiceHarness.run(serverAPI: true) { service in
            #expect(try await eventually(timeout: 20) { try await Self.runsCompleted(service) })
            let url = JSONValue.string("http://127.0.0.1:\(service.port)/v1/notifications/app-store")
            let token = try #require(try await service.request("GET", "/v1/users/ivy/app-account-token").json()["app_account_token"] as? String)
            await service.application.shutdown()
            let now = Int64(Date().timeIntervalSince1970 * 1_000)
            _ = try await service.fakeBuy(["product_id": .string(Self.monthly), "type": "auto_renewable", "environment": "Production",
                                           "app_account_token": .string(token), "notify": ["url": url]])
            service.fake.notificationLog.record(
                .init(uuid: UUID().uuidString.lowercased(), signedPayload: "eyJhbGciOiJFUzI1NiJ9.e30.c2ln", environment: .production,
                      type: "DID_RENEW", subtype: nil, originalTransactionID: nil, attempts: []),
                attempt: now, result: "NO_RESPONSE")
            _ = try await service.fakeBuy(["product_id": "com.example.coins.100", "type": "consumable", "environment": "Production",
                                           "app_account_token": .string(token), "notify": ["url": url]])
            let started = Date()
            let (second, port) = try await Self.startInstance(service)
            #expect(try await eventually(timeout: 30) { try await Self.appliedNotifications(service, "ivy") == 2 })
            #expect(try await eventually(timeout: 20) { try await Self.runsCompleted(service, since: started) })
            #expect(try await service.sql("SELECT 1 FROM app_store_notifications WHERE user_id = 'ivy'").count == 2)
            let after = try await Self.entitlements("ivy", port: port)
            #expect(after.entitlement("premium")?["active"] as? Bool == true)
            #expect((after["consumables"] as? [String: Any])?["coins"] as? Int == 100)
            await second.shutdown()
        }
    }

    @Test @Loop func aRunApplesRateLimitInterruptsResumesAtItsPage() async throws {
        try await ServiceHarness.run(serverAPI: true) { service in
            try await Self.missTwoPagesOfNotifications(service)
            // The first page answers, the second is rate limited beyond the page's wait (Retry-After in 11 s).
            #expect(try await service.fakeCall("POST", "/control/server-api/scenarios", [
                "endpoint": "notification_history", "environment": "Sandbox", "steps": [[:], ["status": 429, "retry_after_ms": 11_000]],
            ]).status == 201)
            let asked = try await Self.historyRequests(service).sandbox
            _ = try await service.sql("UPDATE notification_history_runs SET next_run_at = now() WHERE environment = 'Sandbox'")

            // Postponed with its place kept: the first page stored (parked: nobody owns the purchase yet).
            #expect(try await eventually(timeout: 20) {
                try await service.sql("""
                    SELECT 1 FROM notification_history_runs
                     WHERE environment = 'Sandbox' AND pagination_token IS NOT NULL AND claim_id IS NULL AND last_error LIKE '%rateLimited%'
                       AND next_run_at > now() + interval '5 seconds'
                    """).count == 1
            })
            #expect(try await service.sql("SELECT 1 FROM app_store_notifications WHERE state = 'parked'").count == 20)

            // After Apple's Retry-After the run goes on from the second page, not from the first.
            #expect(try await eventually(timeout: 30) {
                let run = try await service.sql("""
                    SELECT 1 FROM notification_history_runs
                     WHERE environment = 'Sandbox' AND claim_id IS NULL AND last_error IS NULL AND completed_at = updated_at
                    """)
                guard run.count == 1 else { return false }
                return try await service.sql("SELECT 1 FROM app_store_notifications").count == 22
            })
            let requests = try await service.fakeCall("GET", "/control/server-api/requests").json()["requests"] as? [[String: Any]] ?? []
            let sandbox = requests.filter { $0["endpoint"] as? String == "notification_history" && $0["environment"] as? String == "Sandbox" }
            let trail = sandbox.dropFirst(asked).map { "\($0["status"] ?? "") \(($0["path"] as? String ?? "").contains("paginationToken") ? "next" : "first")" }
            #expect(trail == ["200 first", "429 next", "200 next"])
        }
    }

    /// A shutdown while a run waits for a slow page: the run is cancelled and released at the page it reached at
    /// once, rather than the shutdown waiting for Apple and every page left (a first run may have many).
    @Test @Loop func aShutdownReleasesARunAtItsPageWithoutWaitingForApple() async throws {
        try await ServiceHarness.run(serverAPI: true) { service in
            try await Self.missTwoPagesOfNotifications(service)
            // The first page answers; the second keeps every attempt waiting past APPLE_TIMEOUT_MS (3 s).
            let stalls: [JSONValue] = [[:]] + Array(repeating: ["delay_ms": 12_000], count: 4)
            #expect(try await service.fakeCall("POST", "/control/server-api/scenarios", [
                "endpoint": "notification_history", "environment": "Sandbox", "steps": .array(stalls),
            ]).status == 201)
            _ = try await service.sql("UPDATE notification_history_runs SET next_run_at = now() WHERE environment = 'Sandbox'")
            #expect(try await eventually(timeout: 20) {
                try await service.sql("""
                    SELECT 1 FROM notification_history_runs WHERE environment = 'Sandbox' AND pagination_token IS NOT NULL AND claim_id IS NOT NULL
                    """).count == 1
            })
            let clock = ContinuousClock()
            let took = await clock.measure { await service.application.shutdown() }
            // Without the cancellation the page's attempts take its whole call time (10 s).
            #expect(took < .seconds(5), "the shutdown took \(took)")
            let run = try await service.sql("""
                SELECT 1 FROM notification_history_runs
                 WHERE environment = 'Sandbox' AND claim_id IS NULL AND pagination_token IS NOT NULL AND last_error LIKE '%cancelled%'
                """)
            let detail = try await service.sql("SELECT last_error FROM notification_history_runs WHERE environment = 'Sandbox'").first?
                .optionalString("last_error")
            #expect(run.count == 1, "\(detail ?? "-")")
        }
    }

    @Test @Loop func oneInstanceHoldsARunAndATakeOverFencesTheFormerHolder() async throws {
        try await PurchaseStack.run { stack in
            let store = NotificationHistoryStore()
            let first = try #require(try await store.claim(["Production"], lease: .seconds(60), on: stack.pool))
            #expect(first.environment == "Production" && first.windowStart == nil && first.attempts == 1)
            #expect(try await store.claim(["Production"], lease: .seconds(60), on: stack.pool) == nil)
            let start = Date(timeIntervalSince1970: 1_800_000_000), end = start.addingTimeInterval(3_600)
            #expect(try await store.begin(first, start: start, end: end, on: stack.pool))
            #expect(try await store.advance(first, to: "page-20", lease: .zero, on: stack.pool))

            // Its lease over, another instance takes the run on at the page reached; the first writes nothing more.
            let second = try #require(try await store.claim(["Production"], lease: .seconds(60), on: stack.pool))
            #expect(second.environment == "Production" && second.claimID != first.claimID && second.attempts == 2)
            #expect(second.windowStart == start && second.windowEnd == end && second.paginationToken == "page-20")
            #expect(try await store.advance(first, to: "page-40", lease: .seconds(60), on: stack.pool) == false)
            #expect(try await store.complete(first, interval: .seconds(60), on: stack.pool) == false)

            #expect(try await store.complete(second, interval: .seconds(3_600), on: stack.pool))
            let row = try await stack.sql("SELECT covered_until, window_start, attempts, next_run_at > now() + interval '59 minutes' AS later FROM notification_history_runs WHERE environment = 'Production'")[0]
            #expect(try row.date("covered_until") == end && row.optionalDate("window_start") == nil && row.int("attempts") == 0 && row.bool("later"))
            // At start a scheduled run is due at once; a held one is left to its holder.
            try await store.runNow(["Production"], on: stack.pool)
            let third = try #require(try await store.claim(["Production"], lease: .seconds(60), on: stack.pool))
            try await store.runNow(["Production"], on: stack.pool)
            #expect(try await store.claim(["Production"], lease: .seconds(60), on: stack.pool) == nil)
            #expect(try await store.postpone(third, by: .seconds(5), restartWindow: true, error: "x", on: stack.pool))
        }
    }

    @Test @Loop func theWindowStartsAnHourBeforeTheLastNotificationOrRunAndAtMost180DaysBack() {
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        let hour: TimeInterval = 3_600, day: TimeInterval = 86_400
        let window = NotificationHistoryWorker.window
        #expect(window(now.addingTimeInterval(-2 * hour), nil, now) == (now.addingTimeInterval(-3 * hour), now))
        #expect(window(now.addingTimeInterval(-2 * hour), now.addingTimeInterval(-5 * hour), now).start == now.addingTimeInterval(-6 * hour))
        #expect(window(now.addingTimeInterval(-5 * hour), now.addingTimeInterval(-2 * hour), now).start == now.addingTimeInterval(-6 * hour))
        // A run that ended less than an hour before the last notification: the contract's window, from that
        // notification minus an hour.
        #expect(window(now.addingTimeInterval(-hour), now.addingTimeInterval(-1.5 * hour), now).start == now.addingTimeInterval(-2 * hour))
        #expect(window(nil, now.addingTimeInterval(-hour), now).start == now.addingTimeInterval(-2 * hour))
        #expect(window(nil, nil, now).start == now.addingTimeInterval(-180 * day + 60))
        #expect(window(now.addingTimeInterval(-200 * day), nil, now).start == now.addingTimeInterval(-180 * day + 60))
    }
}
