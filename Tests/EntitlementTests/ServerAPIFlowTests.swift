import EntitlementModel
import Foundation
import Testing

/// The App Store Server API's statuses, its Production-then-Sandbox flow and the request budget: pure.
@Suite struct ServerAPIFlowTests {
    // MARK: - Classification

    @Test(arguments: [
        (200, nil, ServerAPIStatus.ok),
        (404, 4_040_010, .notFound(errorCode: 4_040_010)), (404, 4_040_005, .notFound(errorCode: 4_040_005)),
        (404, 4_040_002, .retryable(errorCode: 4_040_002)), (404, 4_040_004, .retryable(errorCode: 4_040_004)),
        (404, 4_040_006, .retryable(errorCode: 4_040_006)), (500, 5_000_001, .retryable(errorCode: 5_000_001)),
        (500, 5_000_000, .retryable(errorCode: 5_000_000)), (503, nil, .retryable(errorCode: nil)), (408, nil, .retryable(errorCode: nil)),
        (401, nil, .unauthorized), (400, 4_000_006, .rejected(errorCode: 4_000_006)), (404, 4_040_001, .rejected(errorCode: 4_040_001)),
        (404, 4_040_003, .rejected(errorCode: 4_040_003)), (403, nil, .rejected(errorCode: nil)),
    ] as [(Int, Int?, ServerAPIStatus)])
    func everyStatusHasItsClass(http: Int, errorCode: Int?, expected: ServerAPIStatus) {
        #expect(ServerAPIStatus(httpStatus: http, errorCode: errorCode, retryAfter: nil, now: Date()) == expected)
    }

    @Test func retryAfterIsAUnixTimeInMilliseconds() {
        let status = ServerAPIStatus(httpStatus: 429, errorCode: 4_290_000, retryAfter: "1767225600000", now: Date())
        #expect(status == .rateLimited(retryAfter: Date(timeIntervalSince1970: 1_767_225_600)))
        let now = Date(timeIntervalSince1970: 1_000)
        #expect(ServerAPIStatus.retryAfterDate("30", now: now) == now.addingTimeInterval(30))
        #expect(ServerAPIStatus.retryAfterDate("soon", now: now) == nil)
        #expect(ServerAPIStatus(httpStatus: 429, errorCode: nil, retryAfter: nil, now: Date()) == .rateLimited(retryAfter: nil))
    }

    @Test func transportFailuresAreRetryable() {
        #expect(ServerAPIStatus(.timeout) == .retryable(errorCode: nil))
        #expect(ServerAPIStatus(.connectionError("refused")) == .retryable(errorCode: nil))
    }

    // MARK: - The flow

    private func run(_ answers: [ServerAPIStatus], first: StoreEnvironment = .production) -> ([StoreEnvironment], ServerAPIFlow.Result?) {
        var flow = ServerAPIFlow(firstEnvironment: first)
        var sent: [StoreEnvironment] = []
        var action = flow.start()
        var remaining = answers[...]
        while true {
            switch action {
            case .send(let environment):
                sent.append(environment)
                guard let answer = remaining.popFirst() else { return (sent, nil) }
                action = flow.received(answer)
            case .finish(let result):
                return (sent, result)
            }
        }
    }

    @Test func productionAnswers() {
        let (sent, result) = run([.ok])
        #expect(sent == [.production] && result == .answered(environment: .production))
    }

    @Test func notFoundInProductionAsksSandboxOnce() {
        #expect(run([.notFound(errorCode: 4_040_010), .ok]) == ([.production, .sandbox], .answered(environment: .sandbox)))
        #expect(run([.notFound(errorCode: 4_040_010), .notFound(errorCode: 4_040_010)])
                == ([.production, .sandbox], .notFound(errorCode: 4_040_010)))
        #expect(run([.notFound(errorCode: 4_040_005)], first: .sandbox) == ([.sandbox], .notFound(errorCode: 4_040_005)))
    }

    @Test func unauthorizedBeforeReleaseAsksSandbox() {
        #expect(run([.unauthorized, .ok]) == ([.production, .sandbox], .answered(environment: .sandbox)))
        let (_, bothRefused) = run([.unauthorized, .unauthorized])
        guard case .configurationError? = bothRefused else { Issue.record("\(String(describing: bothRefused))"); return }
        let (_, refusedThenUnknown) = run([.unauthorized, .notFound(errorCode: 4_040_010)])
        guard case .configurationError? = refusedThenUnknown else { Issue.record("\(String(describing: refusedThenUnknown))"); return }
    }

    @Test func rateLimitsAndRetryableAnswersFinishForLater() {
        let until = Date(timeIntervalSince1970: 2_000_000_000)
        #expect(run([.rateLimited(retryAfter: until)]) == ([.production], .rateLimited(until: until)))
        let (sent, result) = run([.notFound(errorCode: 4_040_010), .retryable(errorCode: 5_000_001)])
        #expect(sent == [.production, .sandbox])
        guard case .retryLater? = result else { Issue.record("\(String(describing: result))"); return }
    }

    @Test func resendAsksTheSameEnvironmentAndKeepsWhatTheFlowLearnt() {
        var flow = ServerAPIFlow()
        #expect(flow.start() == .send(.production))
        #expect(flow.received(.unauthorized) == .send(.sandbox))
        guard case .finish(.retryLater) = flow.received(.retryable(errorCode: 5_000_001)) else { Issue.record("not retryLater"); return }
        #expect(flow.resend() == .send(.sandbox))
        // Production refused the key: Sandbox's "not found" is still a configuration error after the resend.
        guard case .finish(.configurationError) = flow.received(.notFound(errorCode: 4_040_010)) else { Issue.record("not a configuration error"); return }

        var limited = ServerAPIFlow()
        _ = limited.start()
        let until = Date(timeIntervalSince1970: 2_000_000_000)
        #expect(limited.received(.rateLimited(retryAfter: until)) == .finish(.rateLimited(until: until)))
        #expect(limited.resend() == .send(.production))
        #expect(limited.received(.notFound(errorCode: 4_040_010)) == .send(.sandbox))
        #expect(limited.received(.ok) == .finish(.answered(environment: .sandbox)))
    }

    @Test func aCallAboutOneEnvironmentNeverLeavesIt() {
        var flow = ServerAPIFlow(firstEnvironment: .production, fallsBackToSandbox: false)
        _ = flow.start()
        guard case .finish(.configurationError) = flow.received(.unauthorized) else { Issue.record("not a configuration error"); return }
        var unknown = ServerAPIFlow(firstEnvironment: .production, fallsBackToSandbox: false)
        _ = unknown.start()
        #expect(unknown.received(.notFound(errorCode: 4_040_010)) == .finish(.notFound(errorCode: 4_040_010)))
        #expect(!unknown.fellBackToSandbox)
    }

    @Test func rejectionsAreFinal() {
        let (sent, result) = run([.rejected(errorCode: 4_000_006)])
        #expect(sent == [.production])
        #expect(result == .rejected(errorCode: 4_000_006, detail: "Apple refused the request (errorCode 4000006)"))
    }

    // MARK: - The budget

    @Test func aBucketAllowsItsBurstThenItsRate() {
        let start = Date(timeIntervalSince1970: 1_000)
        var budget = RequestBudget(defaultAllowance: .init(ratePerSecond: 10, burst: 3))
        for _ in 0..<3 { #expect(budget.admit("statuses", now: start) == nil) }
        let next = budget.admit("statuses", now: start)
        #expect(next == start.addingTimeInterval(0.1))
        #expect(budget.admit("statuses", now: start.addingTimeInterval(0.1)) == nil)
        // Another endpoint has its own bucket.
        #expect(budget.admit("history", now: start) == nil)
    }

    @Test func appleWaitIsSharedByEveryEndpointAndNeverShortened() {
        let now = Date(timeIntervalSince1970: 1_000)
        var budget = RequestBudget(allowances: ["lookup": .init(ratePerSecond: 1, burst: 1)], defaultAllowance: .init(ratePerSecond: 100, burst: 100))
        budget.rateLimited(until: now.addingTimeInterval(30), now: now)
        budget.rateLimited(until: now.addingTimeInterval(5), now: now)
        #expect(budget.admit("statuses", now: now) == now.addingTimeInterval(30))
        #expect(budget.admit("lookup", now: now.addingTimeInterval(10)) == now.addingTimeInterval(30))
        #expect(budget.admit("lookup", now: now.addingTimeInterval(30)) == nil)
        budget.rateLimited(until: nil, now: now.addingTimeInterval(40), fallback: 60)
        #expect(budget.blockedUntil == now.addingTimeInterval(100))
    }
}
