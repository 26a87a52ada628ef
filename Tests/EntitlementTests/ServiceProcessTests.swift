import EntitlementModel
import Foundation
import Testing
@testable import AppStore
@testable import EntitlementService
@testable import FakeAppStore
@testable import ServiceRuntime

/// What only a real process shows: graceful SIGTERM, and no receipt lost or counted twice across SIGKILL.
@Suite(.serialized, .timeLimit(.minutes(3)))
@Loop
struct ServiceProcessTests {
    /// A fresh database, the fake App Store in-process (answering after `latencyMs`), and the environment a
    /// child service needs.
    private func setUp(latencyMs: Int = 0) async throws -> TestService {
        try await TestService.prepare(
            "proc", catalog: ServiceHarness.catalog, bundleID: ServiceHarness.bundleID,
            fake: FakeAppStoreConfiguration(sharedSecret: ServiceHarness.sharedSecret, latencyMs: latencyMs),
            environment: ["API_KEYS": ServiceHarness.appKey, "APPLE_TIMEOUT_MS": "1000", "RETRY_BASE_MS": "100", "RETRY_MAX_MS": "500"])
    }

    private func post(_ receipt: FakeReceipt, user: String, port: Int, waitMs: Int) async throws -> RawHTTPClient.Response {
        let json = String(decoding: try JSONEncoder().encode(["user_id": user, "receipt_data": receipt.receiptData]), as: UTF8.self)
        let text = RawHTTPClient.request("POST", "/v1/receipts?wait_ms=\(waitMs)",
                                         headers: [("Authorization", "Bearer \(ServiceHarness.appKey)")], body: json)
        return try await RawHTTPClient.exchange(port: port, text, timeout: 30)
    }

    @Test func sigtermFinishesInFlightRequestsAndExitsZero() async throws {
        let setup = try await setUp(latencyMs: 1_500)
        let (fake, environment) = (setup.fake, setup.environment)
        let service = try await offLoop { try ServiceProcess(environment: environment) }
        let receipt = FakeReceipt(bundleID: ServiceHarness.bundleID).with {
            $0.addPurchase("com.example.lifetime", transactionID: "term-1", purchased: Date())
        }
        let inFlight = Task { try await post(receipt, user: "term-user", port: service.port, waitMs: 20_000) }
        // The request is in flight once the fake has seen it.
        let deadline = RawHTTPClient.now() + 10
        while fake.state.received.isEmpty && RawHTTPClient.now() < deadline { await LoopTimer.sleep(milliseconds: 10) }
        let signalled = RawHTTPClient.now()
        service.signal(SIGTERM)
        let answer = try await inFlight.value
        #expect(answer.status == 202 || answer.status == 200, "\(answer.text)")
        let status = try await offLoop { service.waitForExit(timeout: 10) }
        #expect(status == 0, "\(service.log)")
        #expect(RawHTTPClient.now() - signalled < 10)
        #expect(service.log.contains("event=stopped"))
        await setup.tearDown()
    }

    @Test func sigkillLosesNothingAndCountsNothingTwice() async throws {
        let setup = try await setUp(latencyMs: 3_000)
        let (fake, environment) = (setup.fake, setup.environment)
        let first = try await offLoop { try ServiceProcess(environment: environment) }
        let count = 12
        var receipts: [FakeReceipt] = []
        for index in 0..<count {
            receipts.append(FakeReceipt(bundleID: ServiceHarness.bundleID).with {
                $0.addPurchase("com.example.coins.100", transactionID: "kill-\(index)", purchased: Date())
            })
        }
        for (index, receipt) in receipts.enumerated() {
            let answer = try await post(receipt, user: "kill-user-\(index % 3)", port: first.port, waitMs: 0)
            #expect(answer.status == 202, "\(answer.text)")
        }
        // Killed while every verification is in flight (the fake holds each answer for 3 s).
        first.signal(SIGKILL)
        _ = try await offLoop { first.waitForExit(timeout: 10) }
        fake.state.configure(sharedSecret: nil, latencyMs: 0, outage: nil)

        let second = try await offLoop { try ServiceProcess(environment: environment) }
        let connection = try await PostgresConnection.connect(setup.databaseURL)
        let deadline = RawHTTPClient.now() + 60
        var verified = 0
        while RawHTTPClient.now() < deadline {
            verified = try await connection.query("SELECT count(*)::int AS n FROM receipt_submissions WHERE status = 'verified'", []).rows[0].int("n")
            if verified == count { break }
            await LoopTimer.sleep(milliseconds: 100)
        }
        #expect(verified == count, "\(second.log)")
        let submissions = try await connection.query("SELECT count(*)::int AS n FROM receipt_submissions", []).rows[0].int("n")
        #expect(submissions == count)
        let credits = try await connection.query("SELECT count(*)::int AS n, count(DISTINCT transaction_id)::int AS d FROM consumable_ledger WHERE kind = 'credit'", []).rows[0]
        #expect(try credits.int("n") == count && credits.int("d") == count)
        let balance = try await connection.query("SELECT sum(balance)::int AS total FROM consumable_balances", []).rows[0].int("total")
        #expect(balance == count * 100)
        connection.close()
        second.signal(SIGTERM)
        #expect(try await offLoop { second.waitForExit(timeout: 10) } == 0)
        await setup.tearDown()
    }

    @Test func workersShareOnePortAndStopTogether() async throws {
        let setup = try await setUp()
        let environment = setup.environment
        let port = try TestDatabase.freePort()
        let service = try await offLoop {
            try ServiceProcess(environment: environment.merging(["WORKERS": "2", "PORT": String(port)]) { $1 })
        }
        // Both processes log that they serve the same port.
        let deadline = RawHTTPClient.now() + 30
        var serving: [Substring] = []
        while RawHTTPClient.now() < deadline {
            serving = service.log.split(separator: "\n").filter { $0.contains("event=serving") && $0.contains("port=\(port)") }
            if serving.count == 2 { break }
            await LoopTimer.sleep(milliseconds: 20)
        }
        #expect(serving.count == 2, "\(service.log)")
        for _ in 0..<20 {
            let health = try await RawHTTPClient.exchange(port: port, RawHTTPClient.request("GET", "/healthz"))
            #expect(health.status == 200)
        }
        service.signal(SIGTERM)
        #expect(try await offLoop { service.waitForExit(timeout: 10) } == 0)
        #expect(service.log.components(separatedBy: "event=stopped").count - 1 == 2, "\(service.log)")
        await setup.tearDown()
    }
}
