import EntitlementModel
import Foundation
import Testing
@testable import AppStore
@testable import EntitlementService
@testable import FakeAppStore
@testable import ServiceRuntime

/// Notifications across a SIGKILL of the service: none answered 200 is lost.
@Suite(.serialized, .timeLimit(.minutes(3)))
@Loop
struct NotificationProcessTests {
    @Test func sigkillDuringANotificationBurstLosesNoneThatWasAnswered() async throws {
        let setup = try await TestService.prepare(
            "notify", catalog: ServiceHarness.catalog, bundleID: ServiceHarness.bundleID,
            fake: FakeAppStoreConfiguration(sharedSecret: ServiceHarness.sharedSecret),
            environment: ["API_KEYS": ServiceHarness.appKey, "RETRY_BASE_MS": "100", "RETRY_MAX_MS": "500"])
        let environment = setup.environment
        let first = try await offLoop { try ServiceProcess(environment: environment) }

        // Forty subscriptions bought at the fake, each with its buyer's token from the service.
        let purchases = 40
        var transactions: [String: String] = [:]  // transaction id → user
        for index in 0..<purchases {
            let user = "burst-\(index)"
            let token = try await RawHTTPClient.exchange(port: first.port, RawHTTPClient.request(
                "GET", "/v1/users/\(user)/app-account-token", headers: [("Authorization", "Bearer \(ServiceHarness.appKey)")])).json()["app_account_token"] as? String
            let bought = try await setup.fakeCall("POST", "/control/storekit/purchases", [
                "product_id": "com.example.premium.monthly", "type": "auto_renewable", "app_account_token": .string(try #require(token)),
            ]).json()
            transactions[try #require(bought["transaction_id"] as? String)] = user
        }

        // Two copies of each SUBSCRIBED notification, shuffled, eight at a time; the service is killed mid-burst.
        let url = JSONValue.string("http://127.0.0.1:\(first.port)/v1/notifications/app-store")
        let batch = Task { @Loop in
            try await setup.fakeCall("POST", "/control/storekit/notifications/batch", [
                "url": url, "concurrency": 8,
                "notifications": .array(transactions.keys.sorted().map { id in
                    ["notification_type": "SUBSCRIBED", "subtype": "INITIAL_BUY", "transaction_id": .string(id), "copies": 2]
                }),
            ])
        }
        let connection = try await PostgresConnection.connect(setup.databaseURL)
        defer { connection.close() }
        let deadline = RawHTTPClient.now() + 30
        while RawHTTPClient.now() < deadline {
            let stored = try await connection.query("SELECT count(*)::int AS n FROM app_store_notifications", []).rows[0].int("n")
            if stored >= 10 { break }
            await LoopTimer.sleep(milliseconds: 2)
        }
        first.signal(SIGKILL)
        _ = try await offLoop { first.waitForExit(timeout: 10) }
        let report = try JSONDecoder().decode(JSONValue.self, from: Data(try await batch.value.body))

        var answered: [String: String] = [:]  // notification uuid → user, for those answered 200 at least once
        var unanswered = 0
        for notification in report[member: "notifications"]?.arrayValue ?? [] {
            let statuses = notification[member: "statuses"]?.arrayValue ?? []
            guard let uuid = notification[member: "notification_uuid"]?.text, let id = notification[member: "transaction_id"]?.text else { continue }
            if statuses.contains(200) { answered[uuid] = transactions[id] } else { unanswered += 1 }
        }
        #expect(!answered.isEmpty && unanswered > 0, "the kill should fall inside the burst: \(answered.count) answered, \(unanswered) not")

        // Restarted, the service applies every answered notification (the worker takes those their request
        // did not finish), each for its token's user.
        let second = try await offLoop { try ServiceProcess(environment: environment) }
        var states: [String: (state: String, user: String?)] = [:]
        let applyDeadline = RawHTTPClient.now() + 60
        while RawHTTPClient.now() < applyDeadline {
            states = [:]
            for row in try await connection.query("SELECT notification_uuid, state, user_id FROM app_store_notifications", []).rows {
                states[try row.string("notification_uuid")] = (try row.string("state"), try row.optionalString("user_id"))
            }
            if answered.keys.allSatisfy({ states[$0]?.state == "applied" }) { break }
            await LoopTimer.sleep(milliseconds: 100)
        }
        for (uuid, user) in answered {
            #expect(states[uuid]?.state == "applied" && states[uuid]?.user == user, "\(uuid): \(String(describing: states[uuid]))")
        }
        let owners = try await connection.query("SELECT count(*)::int AS n FROM purchase_owners", []).rows[0].int("n")
        #expect(owners >= answered.count)
        second.signal(SIGTERM)
        #expect(try await offLoop { second.waitForExit(timeout: 10) } == 0)
        await setup.tearDown()
    }
}
