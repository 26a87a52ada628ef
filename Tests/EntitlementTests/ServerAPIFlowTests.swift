import EntitlementModel
import Foundation
import Testing

/// The App Store Server API's statuses, its Production-then-Sandbox flow and the request budget: pure.
@Suite struct ServerAPIFlowTests {
    // MARK: - Classification

    @Test(arguments: [
        (200, nil, ServerAPIStatus.ok),
        (404, 4_040_010, .notFound(errorCode: 4_040_010)), (404, 4_040_005, .notFound(errorCode: 4_040_005)),
        (404, 4_040_002, .retryable(errorCode: 4_040_002, httpStatus: 404)), (404, 4_040_004, .retryable(errorCode: 4_040_004, httpStatus: 404)),
        (404, 4_040_006, .retryable(errorCode: 4_040_006, httpStatus: 404)), (500, 5_000_001, .retryable(errorCode: 5_000_001, httpStatus: 500)),
        (500, 5_000_000, .retryable(errorCode: 5_000_000, httpStatus: 500)), (503, nil, .retryable(errorCode: nil, httpStatus: 503)),
        (408, nil, .retryable(errorCode: nil, httpStatus: 408)), (401, nil, .unauthorized(errorCode: nil)),
        (400, 4_000_006, .rejected(errorCode: 4_000_006, httpStatus: 400)), (404, 4_040_001, .rejected(errorCode: 4_040_001, httpStatus: 404)),
        (404, 4_040_003, .rejected(errorCode: 4_040_003, httpStatus: 404)), (403, nil, .rejected(errorCode: nil, httpStatus: 403)),
    ] as [(Int, Int?, ServerAPIStatus)])
    func everyStatusHasItsClass(http: Int, errorCode: Int?, expected: ServerAPIStatus) {
        #expect(ServerAPIStatus(httpStatus: http, errorCode: errorCode, retryAfter: nil, now: Date()) == expected)
    }

    @Test func retryAfterIsAUnixTimeInMilliseconds() {
        let status = ServerAPIStatus(httpStatus: 429, errorCode: 4_290_000, retryAfter: "1767225600000", now: Date())
        #expect(status == .rateLimited(retryAfter: Date(timeIntervalSince1970: 1_767_225_600), errorCode: 4_290_000))
        let now = Date(timeIntervalSince1970: 1_000)
        #expect(ServerAPIStatus.retryAfterDate("30", now: now) == now.addingTimeInterval(30))
        #expect(ServerAPIStatus.retryAfterDate("soon", now: now) == nil)
        #expect(ServerAPIStatus(httpStatus: 429, errorCode: nil, retryAfter: nil, now: Date()) == .rateLimited(retryAfter: nil, errorCode: nil))
    }

    @Test func transportFailuresAreRetryable() {
        #expect(ServerAPIStatus(.timeout) == .retryable(errorCode: nil, httpStatus: nil))
        #expect(ServerAPIStatus(.connectionError("refused")) == .retryable(errorCode: nil, httpStatus: nil))
    }

    // MARK: - The flow

    private func run(_ answers: [ServerAPIStatus], first: StoreEnvironment = .production) -> ([StoreEnvironment], ServerAPIFlow.Result?) {
        var flow = ServerAPIFlow(firstEnvironment: first)
        return run(answers, on: &flow)
    }

    /// Feeds `answers` to `flow` from its start, one per request; the environments asked and what the call
    /// came to (nil when the answers ran out first).
    private func run(_ answers: [ServerAPIStatus], on flow: inout ServerAPIFlow) -> ([StoreEnvironment], ServerAPIFlow.Result?) {
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
        #expect(run([.unauthorized(errorCode: nil), .ok]) == ([.production, .sandbox], .answered(environment: .sandbox)))
        let (_, bothRefused) = run([.unauthorized(errorCode: nil), .unauthorized(errorCode: nil)])
        guard case .configurationError? = bothRefused else { Issue.record("\(String(describing: bothRefused))"); return }
        let (_, refusedThenUnknown) = run([.unauthorized(errorCode: nil), .notFound(errorCode: 4_040_010)])
        guard case .configurationError? = refusedThenUnknown else { Issue.record("\(String(describing: refusedThenUnknown))"); return }
    }

    @Test func rateLimitsAndRetryableAnswersFinishForLater() {
        let until = Date(timeIntervalSince1970: 2_000_000_000)
        #expect(run([.rateLimited(retryAfter: until, errorCode: 4_290_000)]) == ([.production], .rateLimited(until: until)))
        let (sent, result) = run([.notFound(errorCode: 4_040_010), .retryable(errorCode: 5_000_001, httpStatus: 500)])
        #expect(sent == [.production, .sandbox])
        guard case .retryLater? = result else { Issue.record("\(String(describing: result))"); return }
    }

    @Test func resendAsksTheSameEnvironmentAndKeepsWhatTheFlowLearnt() {
        var flow = ServerAPIFlow()
        #expect(flow.start() == .send(.production))
        #expect(flow.received(.unauthorized(errorCode: nil)) == .send(.sandbox))
        guard case .finish(.retryLater) = flow.received(.retryable(errorCode: 5_000_001, httpStatus: 500)) else { Issue.record("not retryLater"); return }
        #expect(flow.resend() == .send(.sandbox))
        // Production refused the key: Sandbox's "not found" is still a configuration error after the resend.
        guard case .finish(.configurationError) = flow.received(.notFound(errorCode: 4_040_010)) else { Issue.record("not a configuration error"); return }

        var limited = ServerAPIFlow()
        _ = limited.start()
        let until = Date(timeIntervalSince1970: 2_000_000_000)
        #expect(limited.received(.rateLimited(retryAfter: until, errorCode: 4_290_000)) == .finish(.rateLimited(until: until)))
        #expect(limited.resend() == .send(.production))
        #expect(limited.received(.notFound(errorCode: 4_040_010)) == .send(.sandbox))
        #expect(limited.received(.ok) == .finish(.answered(environment: .sandbox)))
    }

    @Test func aCallAboutOneEnvironmentNeverLeavesIt() {
        var flow = ServerAPIFlow(firstEnvironment: .production, fallsBackToSandbox: false)
        _ = flow.start()
        guard case .finish(.configurationError) = flow.received(.unauthorized(errorCode: nil)) else { Issue.record("not a configuration error"); return }
        var unknown = ServerAPIFlow(firstEnvironment: .production, fallsBackToSandbox: false)
        _ = unknown.start()
        #expect(unknown.received(.notFound(errorCode: 4_040_010)) == .finish(.notFound(errorCode: 4_040_010)))
        #expect(!unknown.fellBackToSandbox)
    }

    @Test func rejectionsAreFinal() {
        let (sent, result) = run([.rejected(errorCode: 4_000_006, httpStatus: 400)])
        #expect(sent == [.production])
        #expect(result == .rejected(errorCode: 4_000_006, detail: "Apple refused the request (errorCode 4000006)"))
    }

    // MARK: - What Apple answered

    @Test(arguments: [
        (401, nil, 401), (401, 4_010_000, 4_010_000), (429, 4_290_000, 4_290_000), (429, nil, 429), (500, 5_000_001, 5_000_001),
        (503, nil, 503), (404, 4_040_010, 4_040_010), (400, 4_000_005, 4_000_005), (404, nil, 404), (302, nil, 302), (200, nil, nil),
    ] as [(Int, Int?, Int?)])
    func anAnswerShowsItsErrorCodeElseItsHTTPStatus(http: Int, errorCode: Int?, expected: Int?) {
        #expect(ServerAPIStatus(httpStatus: http, errorCode: errorCode, retryAfter: nil, now: Date()).appleStatus == expected)
    }

    @Test func noAnswerHasNoAppleStatus() {
        #expect(ServerAPIStatus(.timeout).appleStatus == nil)
        #expect(ServerAPIStatus(.connectionError("refused")).appleStatus == nil)
        // An order Production does not know is a 200 with `status` 1: no error.
        #expect(ServerAPIStatus.notFound(errorCode: nil).appleStatus == nil)
        var flow = ServerAPIFlow()
        #expect(flow.appleStatus == nil)
        _ = run([ServerAPIStatus(.timeout)], on: &flow)
        #expect(flow.appleStatus == nil)
    }

    @Test func theFlowKeepsTheLastErrorAppleAnswered() {
        var flow = ServerAPIFlow()
        #expect(run([.unauthorized(errorCode: nil), .unauthorized(errorCode: nil)], on: &flow).1
                == .configurationError(.key, detail: "the App Store Server API refused the key (HTTP 401) in Sandbox"))
        #expect(flow.appleStatus == 401)
        // Production's 401 and Sandbox's "not found" combine: Sandbox's answer is the last.
        flow = ServerAPIFlow()
        #expect(run([.unauthorized(errorCode: nil), .notFound(errorCode: 4_040_010)], on: &flow).1
                == .configurationError(.key, detail: "Production refused the key and Sandbox does not know the id"))
        #expect(flow.appleStatus == 4_040_010)
        // Production's unknown order is no error: Sandbox's 401 is what Apple answered.
        flow = ServerAPIFlow()
        _ = run([.notFound(errorCode: nil), .unauthorized(errorCode: nil)], on: &flow)
        #expect(flow.appleStatus == 401)
        // A retry that gets no answer keeps what Apple answered before.
        flow = ServerAPIFlow()
        _ = flow.start()
        #expect(flow.received(.retryable(errorCode: nil, httpStatus: 503)) == .finish(.retryLater(detail: "Apple could not answer now (HTTP 503)")))
        #expect(flow.appleStatus == 503)
        _ = flow.resend()
        #expect(flow.received(.rateLimited(retryAfter: nil, errorCode: 4_290_000)) == .finish(.rateLimited(until: nil)))
        #expect(flow.appleStatus == 4_290_000)
        _ = flow.resend()
        #expect(flow.received(ServerAPIStatus(.timeout)) == .finish(.retryLater(detail: "Apple could not answer now")))
        #expect(flow.appleStatus == 4_290_000)
    }

    @Test func aRefusalWithoutAnErrorCodeIsTheRequestsAndStaysInItsEnvironment() {
        for http in [302, 403, 404] {
            var flow = ServerAPIFlow()
            let (sent, result) = run([.rejected(errorCode: nil, httpStatus: http)], on: &flow)
            #expect(sent == [.production])
            #expect(result == .configurationError(.request, detail: "the App Store Server API refused the request (HTTP \(http)) in Production"))
            #expect(flow.appleStatus == http)
        }
        // After Production refused the key, Sandbox's bare refusal is what the call comes to.
        #expect(run([.unauthorized(errorCode: nil), .rejected(errorCode: nil, httpStatus: 404)])
                == ([.production, .sandbox], .configurationError(.request, detail: "the App Store Server API refused the request (HTTP 404) in Sandbox")))
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
