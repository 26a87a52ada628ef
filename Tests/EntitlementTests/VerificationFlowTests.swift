import Foundation
import Testing
import EntitlementModel

private func body(_ json: String) throws -> AppStoreResponse {
    try AppStoreResponse(jsonData: Data(json.utf8))
}

private func status(_ code: Int) throws -> AppStoreResponse {
    try body(#"{"status": \#(code)}"#)
}

private let valid = #"{"status": 0, "environment": "Production", "receipt": {"bundle_id": "com.example.app", "in_app": []}}"#

@Suite struct VerificationFlowTests {
    @Test func productionAnswersOK() throws {
        let ok = try body(valid)
        var flow = VerificationFlow()
        #expect(flow.environment == nil)
        #expect(flow.start() == .send(.production))
        #expect(flow.environment == .production)
        #expect(flow.received(.answered(ok)) == .finish(.verified(ok, environment: .production)))
        #expect(flow.answeringEnvironment == .production)
        #expect(flow.environment == nil)
        #expect(flow.requestsSent == 1)
        #expect(flow.redirects == 0)
    }

    @Test func expiredSubscriptionStillVerifies() throws {
        let expired = try AppStoreResponse(
            jsonData: Fixtures.data("verifyreceipt_status21006_ios6_autorenew_trial_expired_venice.json")
        )
        var flow = VerificationFlow(expectedBundleID: "com.foo.bar")
        _ = flow.start()
        #expect(flow.received(.answered(expired)) == .finish(.verified(expired, environment: .production)))
    }

    @Test func sandboxReceiptIsRedirectedToSandbox() throws {
        let redirect = try AppStoreResponse(jsonData: Fixtures.data("verifyreceipt_status21007_ios6_itunesreceipt.json"))
        let ok = try AppStoreResponse(
            jsonData: Fixtures.data("verifyreceipt_status0_ios7_nonrenewing_sandbox_itunesreceipt.json")
        )
        var flow = VerificationFlow()
        #expect(flow.start() == .send(.production))
        #expect(flow.received(.answered(redirect)) == .send(.sandbox))
        #expect(flow.answeringEnvironment == .production)
        #expect(flow.environment == .sandbox)
        #expect(flow.received(.answered(ok)) == .finish(.verified(ok, environment: .sandbox)))
        #expect(flow.answeringEnvironment == .sandbox)
        #expect(flow.redirects == 1)
        #expect(flow.requestsSent == 2)
    }

    @Test func productionReceiptIsRedirectedToProduction() throws {
        let ok = try body(valid)
        var flow = VerificationFlow(firstEnvironment: .sandbox)
        #expect(flow.start() == .send(.sandbox))
        #expect(try flow.received(.answered(status(21008))) == .send(.production))
        #expect(flow.received(.answered(ok)) == .finish(.verified(ok, environment: .production)))
        #expect(flow.answeringEnvironment == .production)
    }

    /// A sandbox answer of 21008 after production's 21007 is followed back to production (API.md: 21008 →
    /// production, wherever it comes); a third redirect is Apple contradicting itself, retried later.
    @Test func redirectBackToProductionIsFollowedOnce() throws {
        let ok = try body(valid)
        var flow = VerificationFlow()
        _ = flow.start()
        #expect(try flow.received(.answered(status(21007))) == .send(.sandbox))
        #expect(try flow.received(.answered(status(21008))) == .send(.production))
        #expect(flow.redirects == 2)
        #expect(flow.received(.answered(ok)) == .finish(.verified(ok, environment: .production)))
        #expect(flow.requestsSent == 3)

        var contradicting = VerificationFlow()
        _ = contradicting.start()
        _ = try contradicting.received(.answered(status(21007)))
        _ = try contradicting.received(.answered(status(21008)))
        let action = try contradicting.received(.answered(status(21007)))
        guard case .finish(.retryLater(appleStatus: 21007, let reason)) = action else {
            Issue.record("expected retryLater, got \(action)")
            return
        }
        #expect(reason.contains("after 2 redirects"))
        #expect(contradicting.requestsSent == 3)
    }

    /// Both redirects and both immediate repeats in one verification: `maxRequests`, which the receipt worker's
    /// lease is sized by.
    @Test func longestVerificationSendsMaxRequests() throws {
        let ok = try body(valid)
        var flow = VerificationFlow()
        _ = flow.start()
        #expect(try flow.received(.answered(status(21002))) == .retrySameEnvironment)
        #expect(try flow.received(.answered(status(21007))) == .send(.sandbox))
        #expect(try flow.received(.answered(status(21002))) == .retrySameEnvironment)
        #expect(try flow.received(.answered(status(21008))) == .send(.production))
        #expect(flow.received(.answered(ok)) == .finish(.verified(ok, environment: .production)))
        #expect(flow.requestsSent == VerificationFlow.maxRequests)
    }

    @Test func sandboxNamingItselfAfterARedirectIsRetryable() throws {
        var flow = VerificationFlow()
        _ = flow.start()
        #expect(try flow.received(.answered(status(21007))) == .send(.sandbox))
        let action = try flow.received(.answered(status(21007)))
        guard case .finish(.retryLater(appleStatus: 21007, let reason)) = action else {
            Issue.record("expected retryLater, got \(action)")
            return
        }
        #expect(reason.contains("the environment it names"))
        #expect(flow.requestsSent == 2)
    }

    @Test func redirectToTheEnvironmentAskedIsRetryable() throws {
        var flow = VerificationFlow()
        _ = flow.start()
        let action = try flow.received(.answered(status(21008)))
        guard case .finish(.retryLater(appleStatus: 21008, _)) = action else {
            Issue.record("expected retryLater, got \(action)")
            return
        }
    }

    @Test func malformedTwiceThenOK() throws {
        let ok = try body(valid)
        var flow = VerificationFlow()
        _ = flow.start()
        #expect(try flow.received(.answered(status(21002))) == .retrySameEnvironment)
        #expect(flow.environment == .production)
        #expect(try flow.received(.answered(status(21002))) == .retrySameEnvironment)
        #expect(flow.immediateRetries == 2)
        #expect(flow.received(.answered(ok)) == .finish(.verified(ok, environment: .production)))
        #expect(flow.requestsSent == 3)
    }

    @Test func malformedThreeTimesIsRejected() throws {
        let malformed = try AppStoreResponse(
            jsonData: Fixtures.data("verifyreceipt_status21002_with_exception_text_itunesreceipt.json")
        )
        var flow = VerificationFlow()
        _ = flow.start()
        #expect(flow.received(.answered(malformed)) == .retrySameEnvironment)
        #expect(flow.received(.answered(malformed)) == .retrySameEnvironment)
        let action = flow.received(.answered(malformed))
        guard case .finish(.rejected(let appleStatus, let detail)) = action else {
            Issue.record("expected rejected, got \(action)")
            return
        }
        #expect(appleStatus == 21002)
        #expect(detail.contains("after 2 immediate retries"))
        #expect(detail.contains("IllegalArgumentException"))
        #expect(flow.requestsSent == 3)
    }

    @Test func malformedAfterARedirectRetriesInTheNewEnvironment() throws {
        var flow = VerificationFlow()
        _ = flow.start()
        #expect(try flow.received(.answered(status(21007))) == .send(.sandbox))
        #expect(try flow.received(.answered(status(21002))) == .retrySameEnvironment)
        #expect(flow.environment == .sandbox)
    }

    @Test(arguments: [21005, 21009, 21001])
    func appleUnavailableIsRetriedLater(code: Int) throws {
        var flow = VerificationFlow()
        _ = flow.start()
        #expect(try flow.received(.answered(status(code)))
            == .finish(.retryLater(appleStatus: code, reason: "Apple status \(code)")))
    }

    @Test(arguments: [21004, 21000])
    func configurationErrors(code: Int) throws {
        var flow = VerificationFlow()
        _ = flow.start()
        #expect(try flow.received(.answered(status(code)))
            == .finish(.configurationError(appleStatus: code, detail: "Apple status \(code)")))
    }

    @Test(arguments: [21003, 21010])
    func rejections(code: Int) throws {
        var flow = VerificationFlow()
        _ = flow.start()
        #expect(try flow.received(.answered(status(code)))
            == .finish(.rejected(appleStatus: code, detail: "Apple status \(code)")))
    }

    @Test func internalErrorMarkedRetryable() throws {
        var flow = VerificationFlow()
        _ = flow.start()
        #expect(try flow.received(.answered(body(#"{"status": 21199, "is-retryable": 1}"#)))
            == .finish(.retryLater(appleStatus: 21199, reason: "Apple status 21199")))
    }

    @Test func internalErrorNotRetryable() throws {
        var flow = VerificationFlow()
        _ = flow.start()
        #expect(try flow.received(.answered(body(#"{"status": 21199, "is-retryable": 0}"#)))
            == .finish(.rejected(appleStatus: 21199, detail: "Apple status 21199")))
    }

    @Test func http503IsRetriedLater() {
        var flow = VerificationFlow()
        _ = flow.start()
        #expect(flow.received(.failed(.httpStatus(503)))
            == .finish(.retryLater(appleStatus: nil, reason: "HTTP 503 from verifyReceipt")))
        #expect(flow.answeringEnvironment == nil)
    }

    @Test func timeoutIsRetriedLater() {
        var flow = VerificationFlow()
        _ = flow.start()
        #expect(flow.received(.failed(.timeout))
            == .finish(.retryLater(appleStatus: nil, reason: "verifyReceipt timed out")))
    }

    @Test(arguments: [TransportFailure.connectionError("Connection refused"), .undecodableBody("not JSON")])
    func otherTransportFailuresAreRetriedLater(failure: TransportFailure) {
        var flow = VerificationFlow()
        _ = flow.start()
        #expect(flow.received(.failed(failure)) == .finish(.retryLater(appleStatus: nil, reason: failure.description)))
    }

    @Test func wrongEndpointIsAConfigurationError() {
        var flow = VerificationFlow()
        _ = flow.start()
        #expect(flow.received(.failed(.httpStatus(404)))
            == .finish(.configurationError(appleStatus: nil, detail: "HTTP 404 from verifyReceipt")))
    }

    @Test func transportFailureAfterARedirectKeepsTheLastAnswer() throws {
        var flow = VerificationFlow()
        _ = flow.start()
        #expect(try flow.received(.answered(status(21007))) == .send(.sandbox))
        #expect(flow.received(.failed(.timeout)) == .finish(.retryLater(appleStatus: nil, reason: "verifyReceipt timed out")))
        #expect(flow.answeringEnvironment == .production)
    }

    /// Apple answered (0) for another app's receipt: the rejection carries Apple's status.
    @Test func anotherAppsReceiptIsRejectedWithApplesStatus() throws {
        var flow = VerificationFlow(expectedBundleID: "com.other.app")
        _ = flow.start()
        #expect(try flow.received(.answered(body(valid)))
            == .finish(.rejected(appleStatus: 0, detail: "receipt is for com.example.app, not com.other.app")))
    }

    /// Status 0 without a receipt is not Apple's answer to a receipt (a proxy or a wrong URL): asked again, never final.
    @Test(arguments: [0, 21006])
    func anAcceptanceWithoutAReceiptIsAskedAgain(code: Int) throws {
        var flow = VerificationFlow(expectedBundleID: "com.example.app")
        _ = flow.start()
        #expect(try flow.received(.answered(status(code)))
            == .finish(.retryLater(appleStatus: code, reason: "Apple status \(code) from Production without a receipt")))
    }

    @Test func matchingOrAbsentBundleIsAccepted() throws {
        let matching = try body(valid)
        let unnamed = try body(#"{"status": 0, "receipt": {"in_app": []}}"#)
        for response in [matching, unnamed] {
            var flow = VerificationFlow(expectedBundleID: "com.example.app")
            _ = flow.start()
            #expect(flow.received(.answered(response)) == .finish(.verified(response, environment: .production)))
        }
    }
}
