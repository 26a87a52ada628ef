import EntitlementModel
import Foundation
import Testing
@testable import AppStore
@testable import EntitlementService
@testable import FakeAppStore
@testable import ServiceRuntime

/// The fake App Store over HTTP: its endpoints, its control API, and waiting without blocking the loop.
@Suite(.timeLimit(.minutes(1))) struct FakeAppStoreServerTests {
    static let fixture = "verifyreceipt_status0_sandbox_pending_renewal_monza.json"

    static func verifyBody(_ receiptData: String, password: String? = nil) -> JSONValue {
        var body: [String: JSONValue] = ["receipt-data": .string(receiptData), "exclude-old-transactions": false]
        if let password { body["password"] = .string(password) }
        return .object(body)
    }

    @Test @Loop func fixtureIsServedByteForByteOnTheRightEndpoint() async throws {
        try await FakeAppStoreHarness.run { fake in
            try await fake.scenario("r", production: [["status": 21007]], sandbox: [["fixture": .string(Self.fixture)]])
            let production = try await fake.call("POST", "/verifyReceipt", Self.verifyBody("r"))
            #expect(production.status == 200)
            #expect(production.body == ["status": 21007])
            let sandbox = try await fake.call("POST", "/sandbox/verifyReceipt", Self.verifyBody("r"))
            #expect(sandbox.status == 200)
            #expect(Array(sandbox.text.utf8) == Array(try Fixtures.data(Self.fixture)))
            #expect(try await fake.call("GET", "/verifyReceipt").status == 405)
        }
    }

    @Test @Loop func controlAPIRefusesBadScenariosByField() async throws {
        try await FakeAppStoreHarness.run { fake in
            let cases: [(JSONValue, String)] = [
                (["production": [["status": 0]]], "receipt_data"),
                (["receipt_data": "r"], "production"),
                (["receipt_data": "r", "production": ["status": 0]], "production"),
                (["receipt_data": "r", "sandbox": [["status": 0], ["stauts": 0]]], "sandbox[1]"),
                (["receipt_data": "r", "production": [["fixture": "../../etc/passwd"]]], "production[0]"),
                (["receipt_data": "r", "production": [["fixture": "verifyreceipt_missing.json"]]], "production[0]"),
                (["receipt_data": "r", "steps": []], "steps"),
            ]
            for (scenario, field) in cases {
                let (status, body, text) = try await fake.call("POST", "/control/scenarios", scenario)
                #expect(status == 400, "\(scenario.jsonText): \(text)")
                guard case .object(let problem)? = body else { continue }
                #expect(problem["field"] == .string(field), "\(scenario.jsonText): \(text)")
            }
            #expect(try await fake.call("POST", "/control/scenarios", rawBody: "{").status == 400)
            #expect(try await fake.received().count == 0)
        }
    }

    @Test @Loop func configIsChangedReadAndResetWithoutEchoingTheSecret() async throws {
        try await FakeAppStoreHarness.run(FakeAppStoreConfiguration(latencyMs: 0)) { fake in
            let put = try await fake.call("PUT", "/control/config", ["shared_secret": "hidden-value", "latency_ms": 5, "outage": false])
            #expect(put.status == 200)
            #expect(put.body == ["shared_secret_set": true, "latency_ms": 5, "outage": false])
            #expect(!put.text.contains("hidden-value"))
            #expect(try await fake.call("POST", "/verifyReceipt", Self.verifyBody("x", password: "nope")).body == ["status": 21004])
            #expect(try await fake.call("PUT", "/control/config", ["shared_secret": nil]).body
                    == ["shared_secret_set": false, "latency_ms": 5, "outage": false])
            #expect(try await fake.call("PUT", "/control/config", ["latency_ms": -1]).status == 400)
            #expect(try await fake.call("PUT", "/control/config", ["outage": "yes"]).status == 400)
            #expect(try await fake.call("PUT", "/control/config", ["latency": 1]).status == 400)

            try await fake.configure(["outage": true])
            #expect(try await fake.call("POST", "/sandbox/verifyReceipt", Self.verifyBody("x")).status == 503)
            let summary = try await fake.received()
            #expect(summary == .init(count: 2, production: 1, sandbox: 1, passwords: ["nope"], environments: ["Production", "Sandbox"]))

            #expect(try await fake.call("POST", "/control/reset").status == 200)
            #expect(try await fake.call("GET", "/control/config").body == ["shared_secret_set": false, "latency_ms": 0, "outage": false])
            #expect(try await fake.received() == .init(count: 0, production: 0, sandbox: 0, passwords: [], environments: []))
        }
    }

    /// With 300 ms of latency, answers wait on loop timers: the control API answers meanwhile, and several
    /// verifications overlap instead of queueing.
    @Test @Loop func latencyWaitsOnTimersWithoutBlockingTheLoop() async throws {
        try await FakeAppStoreHarness.run(FakeAppStoreConfiguration(latencyMs: 300)) { fake in
            let receipt = AppStoreClientTests.receipt().receiptData
            let client = fake.client()
            let clock = ContinuousClock()
            let started = clock.now
            async let first = client.verify(receiptData: receipt, firstEnvironment: .production)
            async let second = client.verify(receiptData: receipt, firstEnvironment: .production)
            async let third = client.verify(receiptData: receipt, firstEnvironment: .production)
            let control = try await fake.call("GET", "/control/config")
            let controlElapsed = clock.now - started
            let results = await [first, second, third]
            let elapsed = clock.now - started
            #expect(control.status == 200)
            #expect(controlElapsed < .milliseconds(250))
            for result in results {
                guard case .verified = result else {
                    Issue.record("expected verified, got \(result)")
                    continue
                }
            }
            #expect(elapsed >= .milliseconds(300))
            #expect(elapsed < .milliseconds(850))
        }
    }

    /// A stalled request holds its connection until the fake shuts down, which releases it with a 503 and
    /// returns instead of waiting for the client's timeout.
    @Test @Loop func shutdownReleasesAStalledRequest() async throws {
        let harness = try FakeAppStoreHarness.start()
        try await harness.scenario("stall", production: [["action": "stall"]])
        let client = harness.client(timeoutMs: 20_000)
        let clock = ContinuousClock()
        let started = clock.now
        let pending = Task { @Loop in await client.verify(receiptData: "stall", firstEnvironment: .production) }
        let deadline = clock.now + .seconds(10)
        while harness.fake.state.counts[.production] == nil && clock.now < deadline {
            await LoopTimer.sleep(milliseconds: 5)
        }
        #expect(harness.fake.state.counts[.production] == 1)
        await harness.fake.shutdown()
        let result = await pending.value
        #expect(result == .retryLater(appleStatus: nil, reason: TransportFailure.httpStatus(503).description))
        #expect(clock.now - started < .seconds(5))
    }
}
