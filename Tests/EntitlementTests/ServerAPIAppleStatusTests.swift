import EntitlementModel
import Foundation
import Testing
@testable import AppStore
@testable import FakeAppStore
@testable import ServiceRuntime

/// What Apple answered, as the Server API client's failures carry it (`appleStatus`: its `errorCode`, else its
/// HTTP status; nil when Apple never answered), against the fake App Store's scripted answers over HTTP.
@Suite(.timeLimit(.minutes(1))) struct ServerAPIAppleStatusTests {
    static let unknown = "1000000000000001"

    @Test @Loop func refusalsCarryWhatAppleAnswered() async throws {
        try await FakeAppStoreHarness.run { fake in
            let client = fake.serverAPIClient()
            try await fake.serverAPIScenario(.transactionInfo, nil, [["status": 401], ["status": 401]])
            guard case .configurationError(.key, _, 401?) = await client.transactionInfo(Self.unknown) else { Issue.record("not the key"); return }
            // A refusal without an errorCode is the request's, and Sandbox is not asked.
            for status in [404, 302] {
                try await fake.serverAPIScenario(.transactionInfo, .production, [["status": .int(status)]])
                guard case .configurationError(.request, let detail, status?) = await client.transactionInfo(Self.unknown) else {
                    Issue.record("not the request's refusal (HTTP \(status))"); return
                }
                #expect(detail.contains("HTTP \(status)"))
            }
            try await fake.serverAPIScenario(.transactionInfo, .production, [["error_code": 4_000_005]])
            #expect(await client.transactionInfo(Self.unknown) == .rejected(errorCode: 4_000_005, detail: "Apple refused the request (errorCode 4000005)"))
            #expect(try await fake.serverAPITrail() == [
                "Production transaction_info 401", "Sandbox transaction_info 401", "Production transaction_info 404",
                "Production transaction_info 302", "Production transaction_info 400",
            ])
        }
    }

    @Test @Loop func retryLaterCarriesWhatAppleAnsweredAndNothingWhenItNeverDid() async throws {
        try await FakeAppStoreHarness.run { fake in
            let client = fake.serverAPIClient(retry: RetrySchedule(baseMs: 5_000, maxMs: 5_000))
            try await fake.serverAPIScenario(.transactionInfo, .production, [["status": 503]])
            guard case .retryLater(_, _, 503?) = await client.transactionInfo(Self.unknown, waitMs: 1_000) else { Issue.record("not 503"); return }
            // A timeout: the request went out and Apple never answered.
            try await fake.serverAPIScenario(.transactionInfo, .production, [["delay_ms": 2_000]])
            guard case .retryLater(_, _, nil) = await client.transactionInfo(Self.unknown, waitMs: 300) else { Issue.record("an apple status"); return }
            guard case .retryLater(nil, _, nil) = await client.transactionInfo(Self.unknown, waitMs: 0) else { Issue.record("an apple status"); return }
            #expect(try await fake.serverAPITrail() == ["Production transaction_info 503", "Production transaction_info -"])
        }
    }
}
