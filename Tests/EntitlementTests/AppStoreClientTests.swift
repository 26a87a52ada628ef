import EntitlementModel
import Foundation
import Testing
@testable import AppStore
@testable import EntitlementService
@testable import FakeAppStore
@testable import ServiceRuntime

/// The real verifyReceipt client (`AppStoreClient` over libcurl) against the fake App Store over loopback:
/// every kind of answer lands in its class.
@Suite(.timeLimit(.minutes(1))) struct AppStoreClientTests {
    static let bundleID = "com.example.app"
    static let start = Date(timeIntervalSince1970: 1_767_225_600)  // 2026-01-01T00:00:00Z
    static let okFixture = "verifyreceipt_status0_ios7_nonrenewing_sandbox_itunesreceipt.json"

    /// A receipt with a lifetime purchase and a monthly subscription renewed three times.
    static func receipt(_ environment: StoreEnvironment = .production, bundleID: String = bundleID) -> FakeReceipt {
        var receipt = FakeReceipt(bundleID: bundleID, environment: environment)
        receipt.addPurchase("com.example.lifetime", transactionID: "3000000001", purchased: start)
        receipt.addSubscription("com.example.premium.monthly", originalTransactionID: "3000000002", start: start,
                                period: ISODuration(months: 1), periods: 3)
        return receipt
    }

    @Test @Loop func validReceiptIsVerifiedInProduction() async throws {
        try await FakeAppStoreHarness.run { fake in
            let receipt = Self.receipt()
            let result = await fake.client(bundleID: Self.bundleID).verify(receiptData: receipt.receiptData, firstEnvironment: .production)
            guard case .verified(let response, let environment) = result else {
                Issue.record("expected verified, got \(result)")
                return
            }
            #expect(environment == .production)
            #expect(response.status == 0)
            #expect(response.environment == .production)
            #expect(response.bundleID == Self.bundleID)
            #expect(Set(response.transactions()) == Set(receipt.inApp + receipt.latestReceiptInfo))
            #expect(response.renewalInfo() == receipt.pendingRenewalInfo)
            let received = try await fake.received()
            #expect(received.environments == ["Production"])
        }
    }

    @Test @Loop func expiredSubscriptionAnswer21006IsVerifiedWithItsReceipt() async throws {
        let name = "verifyreceipt_status21006_ios6_autorenew_trial_expired_venice.json"
        try await FakeAppStoreHarness.run { fake in
            try await fake.scenario("expired", production: [["fixture": .string(name)]])
            let result = await fake.client().verify(receiptData: "expired", firstEnvironment: .production)
            let expected = try decodedFixture(name)
            #expect(result == .verified(expected, environment: .production))
            #expect(expected.status == 21006)
            #expect(!expected.transactions().isEmpty)
        }
    }

    @Test @Loop func sandboxReceiptIsRedirectedOnceAndVerifiedInSandbox() async throws {
        try await FakeAppStoreHarness.run { fake in
            let receipt = Self.receipt(.sandbox)
            let result = await fake.client().verify(receiptData: receipt.receiptData, firstEnvironment: .production)
            guard case .verified(let response, let environment) = result else {
                Issue.record("expected verified, got \(result)")
                return
            }
            #expect(environment == .sandbox)
            #expect(response.environment == .sandbox)
            #expect(response.receipt?.receiptType == "ProductionSandbox")
            let received = try await fake.received()
            #expect(received.environments == ["Production", "Sandbox"])
        }
    }

    @Test @Loop func productionReceiptSentToSandboxIsRedirectedTo21008Production() async throws {
        try await FakeAppStoreHarness.run { fake in
            let receipt = Self.receipt(.production)
            let result = await fake.client().verify(receiptData: receipt.receiptData, firstEnvironment: .sandbox)
            guard case .verified(_, let environment) = result else {
                Issue.record("expected verified, got \(result)")
                return
            }
            #expect(environment == .production)
            let received = try await fake.received()
            #expect(received.environments == ["Sandbox", "Production"])
        }
    }

    /// Production says sandbox (21007), sandbox says production (21008): the client goes back to production,
    /// which answers this time.
    @Test @Loop func sandboxAnswer21008AfterARedirectGoesBackToProduction() async throws {
        try await FakeAppStoreHarness.run { fake in
            try await fake.scenario("both-ways", production: [["status": 21007], ["fixture": .string(Self.okFixture)]],
                                    sandbox: [["status": 21008]])
            let result = await fake.client().verify(receiptData: "both-ways", firstEnvironment: .production)
            #expect(result == .verified(try decodedFixture(Self.okFixture), environment: .production))
            let received = try await fake.received()
            #expect(received.environments == ["Production", "Sandbox", "Production"])
        }
    }

    @Test @Loop func status21002TwiceThenValidIsVerified() async throws {
        try await FakeAppStoreHarness.run { fake in
            try await fake.scenario("flaky", production: [["status": 21002], ["status": 21002], ["fixture": .string(Self.okFixture)]])
            let result = await fake.client().verify(receiptData: "flaky", firstEnvironment: .production)
            #expect(result == .verified(try decodedFixture(Self.okFixture), environment: .production))
            let received = try await fake.received()
            #expect(received.production == 3)
        }
    }

    @Test @Loop func status21002ThreeTimesIsRejected() async throws {
        try await FakeAppStoreHarness.run { fake in
            try await fake.scenario("garbage", production: [["status": 21002]])
            let result = await fake.client().verify(receiptData: "garbage", firstEnvironment: .production)
            guard case .rejected(let status, _) = result else {
                Issue.record("expected rejected, got \(result)")
                return
            }
            #expect(status == 21002)
            let received = try await fake.received()
            #expect(received.production == 3)
        }
    }

    @Test(arguments: [21003, 21010]) @Loop func invalidReceiptIsRejected(status: Int) async throws {
        try await FakeAppStoreHarness.run { fake in
            try await fake.scenario("invalid", production: [["status": .int(status)]])
            let result = await fake.client().verify(receiptData: "invalid", firstEnvironment: .production)
            guard case .rejected(let appleStatus, let detail) = result else {
                Issue.record("expected rejected, got \(result)")
                return
            }
            #expect(appleStatus == status)
            #expect(detail.contains(String(status)))
            let received = try await fake.received()
            #expect(received.count == 1)
        }
    }

    @Test @Loop func wrongOrMissingSharedSecretIsAConfigurationError21004() async throws {
        try await FakeAppStoreHarness.run(FakeAppStoreConfiguration(sharedSecret: "the-right-secret")) { fake in
            let receipt = Self.receipt().receiptData
            for secret in ["a-wrong-secret", nil] {
                let result = await fake.client(secret: secret).verify(receiptData: receipt, firstEnvironment: .production)
                guard case .configurationError(let status, _) = result else {
                    Issue.record("expected a configuration error, got \(result)")
                    continue
                }
                #expect(status == 21004)
            }
            let right = await fake.client(secret: "the-right-secret").verify(receiptData: receipt, firstEnvironment: .production)
            guard case .verified = right else {
                Issue.record("expected verified with the right secret, got \(right)")
                return
            }
            let received = try await fake.received()
            #expect(received.passwords == ["a-wrong-secret", "the-right-secret"])
        }
    }

    @Test @Loop func unreadableRequest21000IsAConfigurationError() async throws {
        try await FakeAppStoreHarness.run { fake in
            try await fake.scenario("unreadable", production: [["status": 21000]])
            let result = await fake.client().verify(receiptData: "unreadable", firstEnvironment: .production)
            guard case .configurationError(let status, _) = result else {
                Issue.record("expected a configuration error, got \(result)")
                return
            }
            #expect(status == 21000)
        }
    }

    @Test(arguments: [21005, 21009]) @Loop func unavailableStatusIsRetryable(status: Int) async throws {
        try await FakeAppStoreHarness.run { fake in
            try await fake.scenario("busy", production: [["status": .int(status)]])
            let result = await fake.client().verify(receiptData: "busy", firstEnvironment: .production)
            guard case .retryLater(let appleStatus, _) = result else {
                Issue.record("expected retry later, got \(result)")
                return
            }
            #expect(appleStatus == status)
            let received = try await fake.received()
            #expect(received.count == 1)
        }
    }

    /// `21100`–`21199` are Apple's internal errors; `is-retryable` (or `is_retryable`) decides their class, and
    /// without it they are retried (Apple's advice for them).
    @Test(arguments: [
        (["status": 21100, "is_retryable": true] as JSONValue, 21100, true),
        (["status": 21199, "is_retryable": 1] as JSONValue, 21199, true),
        (["status": 21150, "is_retryable": false] as JSONValue, 21150, false),
        (["status": 21101] as JSONValue, 21101, true),
        (["body": ["status": 21120, "is_retryable": 1]] as JSONValue, 21120, true),
        (["body": ["status": 21121, "is-retryable": 0]] as JSONValue, 21121, false),
    ])
    @Loop func internalErrorFollowsItsRetryableFlag(step: JSONValue, status: Int, retryable: Bool) async throws {
        try await FakeAppStoreHarness.run { fake in
            try await fake.scenario("internal", production: [step])
            let result = await fake.client().verify(receiptData: "internal", firstEnvironment: .production)
            switch result {
            case .retryLater(let appleStatus, _) where retryable: #expect(appleStatus == status)
            case .rejected(let appleStatus, _) where !retryable: #expect(appleStatus == status)
            default: Issue.record("\(status) retryable=\(retryable): unexpected \(result)")
            }
        }
    }

    @Test @Loop func http503AndOutagesAreRetryable() async throws {
        try await FakeAppStoreHarness.run { fake in
            try await fake.scenario("unavailable", production: [["http_status": 503]])
            let scripted = await fake.client().verify(receiptData: "unavailable", firstEnvironment: .production)
            #expect(scripted == .retryLater(appleStatus: nil, reason: TransportFailure.httpStatus(503).description))

            try await fake.configure(["outage": true])
            let outage = await fake.client().verify(receiptData: Self.receipt().receiptData, firstEnvironment: .production)
            #expect(outage == .retryLater(appleStatus: nil, reason: TransportFailure.httpStatus(503).description))
        }
    }

    @Test @Loop func stalledAnswerTimesOutInBoundedTime() async throws {
        try await FakeAppStoreHarness.run { fake in
            try await fake.scenario("stall", production: [["action": "stall"]])
            let clock = ContinuousClock()
            let started = clock.now
            let result = await fake.client(timeoutMs: 300).verify(receiptData: "stall", firstEnvironment: .production)
            let elapsed = clock.now - started
            #expect(result == .retryLater(appleStatus: nil, reason: TransportFailure.timeout.description))
            #expect(elapsed >= .milliseconds(290))
            #expect(elapsed < .seconds(3))
        }
    }

    @Test @Loop func droppedConnectionIsRetryable() async throws {
        try await FakeAppStoreHarness.run { fake in
            try await fake.scenario("dropped", production: [["action": "drop"], ["fixture": .string(Self.okFixture)]])
            let client = fake.client()
            let first = await client.verify(receiptData: "dropped", firstEnvironment: .production)
            guard case .retryLater(nil, let reason) = first else {
                Issue.record("expected retry later, got \(first)")
                return
            }
            #expect(reason.hasPrefix("connection to verifyReceipt failed"))
            // The service keeps serving after dropping one: the next attempt gets its answer.
            guard case .verified = await client.verify(receiptData: "dropped", firstEnvironment: .production) else {
                Issue.record("the attempt after the drop was not verified")
                return
            }
        }
    }

    @Test @Loop func receiptOfAnotherAppIsRejectedWithApplesStatus() async throws {
        try await FakeAppStoreHarness.run { fake in
            let receipt = Self.receipt(bundleID: "com.someone.else")
            let result = await fake.client(bundleID: Self.bundleID).verify(receiptData: receipt.receiptData, firstEnvironment: .production)
            guard case .rejected(0, let detail) = result else {
                Issue.record("expected a rejection with Apple's status 0, got \(result)")
                return
            }
            #expect(detail.contains("com.someone.else"))
        }
    }

    /// The shared secret goes out as `password` with every request, and neither it nor the receipt reaches the
    /// log, whatever the outcome.
    @Test @Loop func sharedSecretIsSentAndNeverLogged() async throws {
        let secret = "s3cret-\(UUID().uuidString)"
        let receipt = Self.receipt(.sandbox).receiptData
        let (summary, log) = try await capturingStandardError {
            try await FakeAppStoreHarness.run(FakeAppStoreConfiguration(sharedSecret: secret)) { fake in
                let client = fake.client(secret: secret, timeoutMs: 300)
                guard case .verified = await client.verify(receiptData: receipt, firstEnvironment: .production) else {
                    throw FakeAppStoreHarness.HarnessFailure(message: "the receipt was not verified")
                }
                try await fake.scenario("stall", production: [["action": "stall"]])
                _ = await client.verify(receiptData: "stall", firstEnvironment: .production)
                try await fake.configure(["shared_secret": "another-secret"])
                _ = await client.verify(receiptData: receipt, firstEnvironment: .production)
                try await fake.configure(["outage": true])
                _ = await client.verify(receiptData: receipt, firstEnvironment: .production)
                return try await fake.received()
            }
        }
        #expect(summary.passwords == [secret])
        #expect(summary.count == 5)
        #expect(log.contains("event=apple_verify "))
        #expect(log.contains("event=apple_verify_failed "))
        #expect(!log.contains(secret))
        #expect(!log.contains(receipt))
    }

    /// Every verifyReceipt sample is served byte for byte by the fake and decoded by the client into the
    /// class of its status.
    @Test(arguments: Fixtures.jsonNames(prefix: "verifyreceipt_"))
    @Loop func everyFixtureIsServedAndDecoded(name: String) async throws {
        try await FakeAppStoreHarness.run { fake in
            try await fake.scenario(name, production: [["fixture": .string(name)]], sandbox: [["fixture": .string(Self.okFixture)]])
            let result = await fake.client().verify(receiptData: name, firstEnvironment: .production)
            let fixture = try decodedFixture(name)
            switch VerifyStatus(fixture) {
            case .ok, .okExpired:
                #expect(result == .verified(fixture, environment: .production))
            case .redirect(.sandbox):
                #expect(result == .verified(try decodedFixture(Self.okFixture), environment: .sandbox))
            case .malformedOrTransient:
                guard case .rejected(fixture.status, _) = result else {
                    Issue.record("\(name): expected rejected, got \(result)")
                    return
                }
            case .retryable:
                guard case .retryLater(fixture.status, _) = result else {
                    Issue.record("\(name): expected retry later, got \(result)")
                    return
                }
            default:
                Issue.record("\(name): no expectation for status \(fixture.status)")
            }
        }
    }

    /// The request body is `{"exclude-old-transactions":false,"password":…,"receipt-data":…}`, base64 receipts
    /// copied in as they are and anything else escaped.
    @Test(arguments: ["MIIT8wYJKoZIhvcNAQcCoIIT5DCCE+A=", "with \"quotes\", \\ and\na newline", "ünïcode", ""])
    @Loop func requestBodyIsTheRequestsJSON(receiptData: String) throws {
        for password in [nil, "se\"cret"] as [String?] {
            var expected: [String: JSONValue] = ["receipt-data": .string(receiptData), "exclude-old-transactions": false]
            if let password { expected["password"] = .string(password) }
            let body = AppStoreClient.requestBody(receiptData: receiptData, password: password)
            #expect(body == Array(JSONValue.object(expected).jsonText.utf8))
            #expect(try JSONDecoder().decode(JSONValue.self, from: Data(body)) == .object(expected))
        }
    }

    @Test func fixturesAreThere() {
        #expect(Fixtures.jsonNames(prefix: "verifyreceipt_").count >= 17)
    }
}
