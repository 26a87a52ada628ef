import Foundation
import Testing
@testable import EntitlementModel
@testable import EntitlementService
@testable import ServiceRuntime

/// The `webhooks` row of the contract's configuration: `WEBHOOK_URL`, `WEBHOOK_SECRET` (required with it, never
/// echoed), `WEBHOOK_TIMEOUT_MS`, and the as-built retry and concurrency knobs.
@Suite struct WebhookConfigurationTests {
    private static let secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

    @Test func withoutAURLEventsAreRecordedNotSent() throws {
        #expect(try Configuration(environment: [:]).webhooks == nil)
        #expect(try Configuration(environment: ["WEBHOOK_SECRET": Self.secret]).webhooks == nil)
    }

    @Test func defaultsFollowTheContract() throws {
        let settings = try #require(try Configuration(environment: ["WEBHOOK_URL": "https://hooks.example.com/in", "WEBHOOK_SECRET": Self.secret]).webhooks)
        #expect(settings.url == "https://hooks.example.com/in")
        #expect(settings.timeoutMs == 10_000)
        #expect(settings.retry == .standard)
        #expect(settings.concurrency == 32)
    }

    @Test func readsEveryVariable() throws {
        let settings = try #require(try Configuration(environment: [
            "WEBHOOK_URL": "http://127.0.0.1:9/x", "WEBHOOK_SECRET": Self.secret, "WEBHOOK_TIMEOUT_MS": "2500",
            "WEBHOOK_RETRY_BASE_MS": "100", "WEBHOOK_RETRY_MAX_MS": "800", "WEBHOOK_RETRY_WINDOW_S": "60", "WEBHOOK_CONCURRENCY": "4",
        ]).webhooks)
        #expect(settings.timeoutMs == 2_500)
        #expect(settings.retry == WebhookRetryPolicy(schedule: RetrySchedule(baseMs: 100, maxMs: 800), window: 60))
        #expect(settings.concurrency == 4)
    }

    @Test(arguments: [
        (["WEBHOOK_URL": "http://127.0.0.1:9/x"], "WEBHOOK_SECRET"),
        (["WEBHOOK_URL": "ftp://127.0.0.1/x", "WEBHOOK_SECRET": secret], "WEBHOOK_URL"),
        (["WEBHOOK_URL": "http://127.0.0.1:9/x", "WEBHOOK_SECRET": "whsec_c2hvcnQ="], "WEBHOOK_SECRET"),
        (["WEBHOOK_SECRET": "not-a-secret-at-all"], "WEBHOOK_SECRET"),
        (["WEBHOOK_TIMEOUT_MS": "0"], "WEBHOOK_TIMEOUT_MS"),
        (["WEBHOOK_RETRY_BASE_MS": "5000", "WEBHOOK_RETRY_MAX_MS": "10"], "WEBHOOK_RETRY_MAX_MS"),
        (["WEBHOOK_CONCURRENCY": "0"], "WEBHOOK_CONCURRENCY"),
    ])
    func badValuesStopStartUpNamingTheVariable(environment: [String: String], variable: String) {
        do {
            _ = try Configuration(environment: environment)
            Issue.record("accepted \(environment)")
        } catch {
            #expect(error.variable == variable)
            if let secret = environment["WEBHOOK_SECRET"] { #expect(!error.description.contains(secret)) }
        }
    }
}
