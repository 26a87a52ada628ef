import EntitlementModel
import Foundation
import Testing
@testable import AppStore
@testable import EntitlementService
@testable import FakeAppStore
@testable import ServiceRuntime
@testable import VerifyBench

/// The fake App Store's decisions and its fake receipts, without any I/O.
@Suite struct FakeAppStoreTests {
    static let start = Date(timeIntervalSince1970: 1_767_225_600)  // 2026-01-01T00:00:00Z
    static let now = Date(timeIntervalSince1970: 1_780_000_000)

    /// A receipt with every feature the builders offer.
    static func richReceipt(_ environment: StoreEnvironment = .production) -> FakeReceipt {
        var receipt = FakeReceipt(bundleID: "com.example.app", environment: environment)
        receipt.addPurchase("com.example.coins.100", transactionID: "100", purchased: start.addingTimeInterval(0.1234), quantity: 2)
        receipt.addPurchase("com.example.lifetime", transactionID: "101", purchased: start, ownership: .familyShared)
        receipt.addPurchase("com.example.pass.month", transactionID: "102", purchased: start,
                            appAccountToken: "6f1c2e0a-5b8e-4a53-9d0c-0e8a7d2f1b11")
        receipt.addSubscription("com.example.basic.monthly", originalTransactionID: "200", group: "group.premium",
                                start: start, period: ISODuration(months: 1), periods: 3, trial: true,
                                appAccountToken: "0c9a7c1e-7f43-4d7b-9a28-3c55b1f0d2aa")
        receipt.upgrade(originalTransactionID: "200", to: "com.example.pro.monthly", transactionID: "210",
                        at: start.addingTimeInterval(70 * 86_400), period: ISODuration(months: 1), periods: 2)
        receipt.enterBillingRetry(originalTransactionID: "200", gracePeriodEnds: start.addingTimeInterval(140 * 86_400))
        receipt.addSubscription("com.example.magazine.yearly", originalTransactionID: "300", group: "group.magazine",
                                start: start, period: ISODuration(years: 1), willRenew: false, ownership: .familyShared)
        receipt.cancel(transactionID: "101", at: start.addingTimeInterval(86_400), reason: "1")
        return receipt
    }

    static func requestBody(_ receiptData: String?, password: String? = nil, excludeOld: Bool = false) -> [UInt8] {
        var body: [String: JSONValue] = ["exclude-old-transactions": .bool(excludeOld)]
        if let receiptData { body["receipt-data"] = .string(receiptData) }
        if let password { body["password"] = .string(password) }
        return Array(JSONValue.object(body).jsonText.utf8)
    }

    /// The Apple status of a reply that responds with a JSON body.
    static func status(_ reply: FakeAppStoreState.Reply) -> Int? {
        guard case .respond(200, let body) = reply.action else { return nil }
        return try? AppStoreResponse(jsonData: Data(body)).status
    }

    static func step(_ json: JSONValue) throws -> FakeStep {
        try FakeStep.parse(json) { name throws(FakeScenarioError) in
            guard name == "sample.json" else { throw FakeScenarioError("no fixture '\(name)'") }
            return Array(#"{"status": 0, "environment": "Sandbox"}"#.utf8)
        }
    }

    // MARK: - Fake receipts

    @Test func fakeReceiptRoundTripsThroughItsReceiptData() {
        let receipt = Self.richReceipt()
        #expect(FakeReceipt(receiptData: receipt.receiptData) == receipt)
        let decoded = Data(base64Encoded: receipt.receiptData).map { String(decoding: $0, as: UTF8.self) }
        #expect(decoded?.hasPrefix(#"{"fake":{"#) == true)
    }

    @Test func handWrittenFakeReceiptIsRead() throws {
        let json = #"{"fake": {"bundle_id": "com.example.app", "environment": "Sandbox", "in_app": [{"transaction_id": "1001", "product_id": "com.example.lifetime", "purchase_date_ms": 1767225600000, "in_app_ownership_type": "FAMILY_SHARED"}]}}"#
        let receipt = try #require(FakeReceipt(receiptData: Data(json.utf8).base64EncodedString()))
        #expect(receipt.environment == .sandbox)
        #expect(receipt.inApp == [StoreTransaction(
            transactionID: "1001", originalTransactionID: "1001", productID: "com.example.lifetime",
            purchaseDate: Self.start, ownership: .familyShared)])
    }

    @Test(arguments: ["", "not base64!", Data("hello".utf8).base64EncodedString(),
                      Data(#"{"fake": {"environment": "Production"}}"#.utf8).base64EncodedString(),
                      Data(#"{"other": {}}"#.utf8).base64EncodedString()])
    func otherDataIsNoFakeReceipt(data: String) {
        #expect(FakeReceipt(receiptData: data) == nil)
    }

    /// The answer decodes, through the service's own decoder, to exactly the receipt's transactions and
    /// renewal state: family sharing, tokens, trial, upgrade, refund, billing retry and grace period included.
    @Test func answerDecodesToTheReceiptsTransactions() throws {
        let receipt = Self.richReceipt()
        let body = receipt.verifyReceiptBody(receiptData: receipt.receiptData, requestDate: Self.now, excludeOldTransactions: false)
        let response = try AppStoreResponse(jsonData: Data(body.jsonText.utf8))
        #expect(response.status == 0)
        #expect(response.environment == .production)
        #expect(response.bundleID == "com.example.app")
        #expect(response.receipt?.receiptType == "Production")
        #expect(response.receipt?.requestDate == Self.now)
        #expect(response.latestReceipt == receipt.receiptData)
        #expect(Set(response.transactions()) == Set(receipt.inApp + receipt.latestReceiptInfo))
        #expect(Set(response.renewalInfo()) == Set(receipt.pendingRenewalInfo))

        let byID = Dictionary(uniqueKeysWithValues: response.transactions().map { ($0.transactionID, $0) })
        #expect(byID["100"]?.quantity == 2)
        #expect(byID["100"]?.purchaseDate.milliseconds == 1_767_225_600_123)
        #expect(byID["101"]?.ownership == .familyShared)
        #expect(byID["101"]?.cancellationReason == "1")
        #expect(byID["102"]?.appAccountToken == "6f1c2e0a-5b8e-4a53-9d0c-0e8a7d2f1b11")
        #expect(byID["200"]?.isTrialPeriod == true)
        #expect(byID["200002"]?.isUpgraded == true)
        #expect(byID["200002"]?.cancellationDate == Self.start.addingTimeInterval(70 * 86_400))
        #expect(byID["210"]?.originalTransactionID == "200")
        #expect(byID["210"]?.productID == "com.example.pro.monthly")
        let renewal = try #require(response.renewalInfo().first { $0.originalTransactionID == "200" })
        #expect(renewal.productID == "com.example.pro.monthly")
        #expect(renewal.isInBillingRetryPeriod)
        #expect(renewal.expirationIntent == 2)
        #expect(renewal.gracePeriodExpiresDate == Self.start.addingTimeInterval(140 * 86_400))
        #expect(response.renewalInfo().first { $0.originalTransactionID == "300" }?.willRenew == false)
    }

    @Test func excludeOldTransactionsKeepsTheNewestOfEachSubscription() throws {
        let receipt = Self.richReceipt()
        let body = receipt.verifyReceiptBody(receiptData: receipt.receiptData, requestDate: Self.now, excludeOldTransactions: true)
        let response = try AppStoreResponse(jsonData: Data(body.jsonText.utf8))
        #expect(response.latestReceiptInfo.map(\.transactionID).sorted() == ["210001", "300"])
    }

    // MARK: - Steps and scenarios

    @Test func stepsOfEveryKind() throws {
        #expect(try Self.step(["status": 21007]) == FakeStep(reply: .respond(httpStatus: 200, body: Array(#"{"status":21007}"#.utf8)), delayMs: 0))
        #expect(try Self.step(["status": 21100, "is_retryable": 1, "delay_ms": 20])
                == FakeStep(reply: .respond(httpStatus: 200, body: Array(#"{"is-retryable":true,"status":21100}"#.utf8)), delayMs: 20))
        #expect(try Self.step(["fixture": "sample.json"])
                == FakeStep(reply: .respond(httpStatus: 200, body: Array(#"{"status": 0, "environment": "Sandbox"}"#.utf8)), delayMs: 0))
        #expect(try Self.step(["body": ["status": 0, "x": [1, "a"]], "http_status": 500])
                == FakeStep(reply: .respond(httpStatus: 500, body: Array(#"{"status":0,"x":[1,"a"]}"#.utf8)), delayMs: 0))
        #expect(try Self.step(["http_status": 503]).reply == .respond(httpStatus: 503, body: Array("HTTP 503 from the fake App Store\n".utf8)))
        #expect(try Self.step(["delay_ms": 2000]) == FakeStep(reply: .respond(httpStatus: 200, body: nil), delayMs: 2000))
        #expect(try Self.step(["action": "stall", "delay_ms": 5]) == FakeStep(reply: .stall, delayMs: 5))
    }

    @Test(arguments: [
        ("[1]", "a step must be a JSON object"),
        (#"{"stauts": 0}"#, "unknown key 'stauts'"),
        (#"{"status": 0, "fixture": "sample.json"}"#, "'status' and 'fixture' cannot be combined"),
        (#"{"is_retryable": true}"#, "'is_retryable' goes with 'status'"),
        (#"{"status": 21100, "is_retryable": "yes"}"#, "'is_retryable' must be"),
        (#"{"action": "stall", "status": 0}"#, "'action' cannot be combined"),
        (#"{"action": "explode"}"#, "'action' must be"),
        (#"{"http_status": 700}"#, "'http_status' must be an integer in 200...599"),
        (#"{"delay_ms": -1}"#, "'delay_ms' must be an integer"),
        (#"{"status": "0"}"#, "'status' must be an integer"),
        (#"{"fixture": 3}"#, "'fixture' must be a file name"),
        (#"{"fixture": "missing.json"}"#, "no fixture 'missing.json'"),
    ])
    func nonsenseStepsAreRefusedByName(json: String, message: String) throws {
        let value = try JSONDecoder().decode(JSONValue.self, from: Data(json.utf8))
        let error = #expect(throws: FakeScenarioError.self) { try Self.step(value) }
        #expect(error?.message.contains(message) == true, "\(error?.message ?? "no error")")
    }

    @Test func stepsAreTakenInOrderPerEndpointAndTheLastRepeats() throws {
        var scenario = FakeScenario(production: [try Self.step(["status": 21002]), try Self.step(["status": 21005])],
                                    sandbox: [try Self.step(["status": 21009])])
        let taken = (0..<3).map { _ in scenario.next(for: .production)?.reply }
        #expect(taken == [
            .respond(httpStatus: 200, body: Array(#"{"status":21002}"#.utf8)),
            .respond(httpStatus: 200, body: Array(#"{"status":21005}"#.utf8)),
            .respond(httpStatus: 200, body: Array(#"{"status":21005}"#.utf8)),
        ])
        #expect(scenario.next(for: .sandbox)?.reply == .respond(httpStatus: 200, body: Array(#"{"status":21009}"#.utf8)))
        var productionOnly = FakeScenario(production: [try Self.step(["status": 0])], sandbox: [])
        #expect(productionOnly.next(for: .sandbox) == nil)
    }

    // MARK: - Decisions

    @Test func fakeReceiptVerifiesInItsOwnEnvironmentAndRedirectsLikeApple() throws {
        var state = FakeAppStoreState(configuration: FakeAppStoreConfiguration())
        let sandbox = Self.richReceipt(.sandbox).receiptData
        let production = Self.richReceipt(.production).receiptData
        #expect(Self.status(state.verify(environment: .production, body: Self.requestBody(sandbox), now: Self.now)) == 21007)
        #expect(Self.status(state.verify(environment: .sandbox, body: Self.requestBody(production), now: Self.now)) == 21008)
        let reply = state.verify(environment: .sandbox, body: Self.requestBody(sandbox), now: Self.now)
        guard case .respond(200, let body) = reply.action else {
            Issue.record("expected an answer, got \(reply)")
            return
        }
        let response = try AppStoreResponse(jsonData: Data(body))
        #expect(response.status == 0)
        #expect(response.environment == .sandbox)
        #expect(response.receipt?.receiptType == "ProductionSandbox")
        #expect(state.counts == [.production: 1, .sandbox: 2])
    }

    /// A fake receipt's answer is rendered once per receipt, endpoint and second; `request_date` is that second.
    @Test func answersAreRenderedPerSecond() throws {
        var state = FakeAppStoreState(configuration: FakeAppStoreConfiguration())
        let receipt = Self.richReceipt().receiptData
        func answer(_ now: Date, excludeOld: Bool = false) throws -> AppStoreResponse {
            let reply = state.verify(environment: .production, body: Self.requestBody(receipt, excludeOld: excludeOld), now: now)
            guard case .respond(200, let body) = reply.action else { throw FakeAppStoreHarness.HarnessFailure(message: "\(reply)") }
            return try AppStoreResponse(jsonData: Data(body))
        }
        let first = try answer(Self.now.addingTimeInterval(0.25))
        #expect(first.receipt?.requestDate == Self.now)
        #expect(try answer(Self.now.addingTimeInterval(0.75)) == first)
        #expect(try answer(Self.now.addingTimeInterval(1.5)).receipt?.requestDate == Self.now.addingTimeInterval(1))
        #expect(try answer(Self.now, excludeOld: true).latestReceiptInfo.count == 2)
    }

    @Test func unreadableRequestsAre21000AndUnknownReceipts21002() {
        var state = FakeAppStoreState(configuration: FakeAppStoreConfiguration())
        for body in ["", "nonsense", "[]", #""receipt""#] {
            #expect(Self.status(state.verify(environment: .production, body: Array(body.utf8), now: Self.now)) == 21000)
        }
        for data in [nil, "", "MIIT8wYJKoZIhvcNAQcCoIIT5DCCE+A=", Data(#"{"fake": {}}"#.utf8).base64EncodedString()] {
            #expect(Self.status(state.verify(environment: .production, body: Self.requestBody(data), now: Self.now)) == 21002)
        }
    }

    @Test func configuredSharedSecretIsCheckedAndEveryPasswordRecorded() {
        var state = FakeAppStoreState(configuration: FakeAppStoreConfiguration(sharedSecret: "right"))
        let receipt = Self.richReceipt().receiptData
        #expect(Self.status(state.verify(environment: .production, body: Self.requestBody(receipt, password: "wrong"), now: Self.now)) == 21004)
        #expect(Self.status(state.verify(environment: .production, body: Self.requestBody(receipt), now: Self.now)) == 21004)
        #expect(Self.status(state.verify(environment: .production, body: Self.requestBody(receipt, password: "right"), now: Self.now)) == 0)
        #expect(state.received.map(\.password) == ["wrong", nil, "right"])
        state.configure(sharedSecret: .some(nil), latencyMs: nil, outage: nil)
        #expect(Self.status(state.verify(environment: .production, body: Self.requestBody(receipt), now: Self.now)) == 0)
    }

    @Test func latencyDelaysEveryAnswerAndAnOutageAnswers503() throws {
        var state = FakeAppStoreState(configuration: FakeAppStoreConfiguration(latencyMs: 150))
        let receipt = Self.richReceipt().receiptData
        #expect(state.verify(environment: .production, body: Self.requestBody(receipt), now: Self.now).delayMs == 150)
        state.setScenario(FakeScenario(production: [try Self.step(["action": "stall", "delay_ms": 50])], sandbox: []), for: "s")
        #expect(state.verify(environment: .production, body: Self.requestBody("s"), now: Self.now) == .init(delayMs: 200, action: .stall))
        state.configure(sharedSecret: nil, latencyMs: 0, outage: true)
        let outage = state.verify(environment: .production, body: Self.requestBody(receipt), now: Self.now)
        guard case .respond(503, _) = outage.action else {
            Issue.record("expected 503, got \(outage)")
            return
        }
        #expect(outage.delayMs == 0)
    }

    @Test func scenarioOverridesTheFakeReceiptAndADelayOnlyStepKeepsItsAnswer() throws {
        var state = FakeAppStoreState(configuration: FakeAppStoreConfiguration())
        let receipt = Self.richReceipt().receiptData
        state.setScenario(FakeScenario(production: [try Self.step(["status": 21005]), try Self.step(["delay_ms": 30])], sandbox: []), for: receipt)
        #expect(Self.status(state.verify(environment: .production, body: Self.requestBody(receipt), now: Self.now)) == 21005)
        let delayed = state.verify(environment: .production, body: Self.requestBody(receipt), now: Self.now)
        #expect(delayed.delayMs == 30)
        #expect(Self.status(delayed) == 0)
    }

    @Test func resetRestoresTheStartAndTheLogKeepsTheNewest() throws {
        var state = FakeAppStoreState(configuration: FakeAppStoreConfiguration(sharedSecret: "start"))
        state.configure(sharedSecret: .some("changed"), latencyMs: 10, outage: true)
        state.setScenario(FakeScenario(production: [try Self.step(["status": 21005])], sandbox: []), for: "r")
        for index in 0...FakeAppStoreState.keptRequests {
            _ = state.verify(environment: .production, body: Self.requestBody("r", password: String(index)), now: Self.now)
        }
        #expect(state.received.count == FakeAppStoreState.keptRequests)
        #expect(state.received.first?.password == "1")
        #expect(state.counts[.production] == FakeAppStoreState.keptRequests + 1)
        state.reset()
        #expect(state.configuration == FakeAppStoreConfiguration(sharedSecret: "start"))
        #expect(state.received.isEmpty && state.counts.isEmpty)
        #expect(Self.status(state.verify(environment: .production, body: Self.requestBody("r", password: "start"), now: Self.now)) == 21002)
    }

    // MARK: - Configuration

    @Test func configurationComesFromTheEnvironment() throws {
        let configuration = try FakeAppStoreConfiguration(environment: [
            "FAKE_APPLE_SHARED_SECRET": "secret", "FAKE_APPLE_LATENCY_MS": "2000", "FAKE_APPLE_OUTAGE": "true",
            "FAKE_APPLE_FIXTURES_DIR": "/tmp/fixtures", "FAKE_APPLE_BUNDLE_ID": "com.example.other", "FAKE_APPLE_APP_APPLE_ID": "42",
            "FAKE_APPLE_SIGNING_DIR": "/tmp/signing", "FAKE_APPLE_ROOT_CERTIFICATE_FILE": "/tmp/root.der",
        ])
        #expect(configuration == FakeAppStoreConfiguration(
            sharedSecret: "secret", latencyMs: 2000, outage: true, fixturesDirectory: "/tmp/fixtures", bundleID: "com.example.other",
            appAppleID: 42, signingDirectory: "/tmp/signing", rootCertificateFile: "/tmp/root.der"))
        #expect(try FakeAppStoreConfiguration(environment: [:]) == FakeAppStoreConfiguration())
        #expect(FakeAppStoreConfiguration.defaultFixturesDirectory == Fixtures.directory.path)
        #expect(throws: ConfigurationError(variable: "FAKE_APPLE_LATENCY_MS", problem: "expected an integer in 0...600000, got 'soon'")) {
            try FakeAppStoreConfiguration(environment: ["FAKE_APPLE_LATENCY_MS": "soon"])
        }
        #expect(throws: ConfigurationError.self) { try FakeAppStoreConfiguration(environment: ["FAKE_APPLE_OUTAGE": "maybe"]) }
        #expect(throws: ConfigurationError(variable: "FAKE_APPLE_APP_APPLE_ID", problem: "expected a positive integer, got '0'")) {
            try FakeAppStoreConfiguration(environment: ["FAKE_APPLE_APP_APPLE_ID": "0"])
        }
        #expect(FakeAppStoreConfiguration().bundleID == "com.example.app" && FakeAppStoreConfiguration().appAppleID == 1_234_567_890)
    }

    @Test func benchArgumentsAreParsed() throws {
        let options = try VerifyBenchmark.parse([
            "--production-url", "https://127.0.0.1:1/verifyReceipt", "--sandbox-url", "https://127.0.0.1:1/sandbox/verifyReceipt",
            "--latency-ms", "2000", "--count", "10", "--ca-bundle", "/tmp/ca.pem",
        ])
        #expect(options.count == 10 && options.latencyMs == 2000 && options.caBundle == "/tmp/ca.pem" && options.secret == nil)
        #expect(throws: VerifyBenchmarkError(message: "--latency-ms (the endpoint's latency) is required")) {
            try VerifyBenchmark.parse(["--production-url", "a", "--sandbox-url", "b"])
        }
        #expect(throws: VerifyBenchmarkError(message: "unknown option '--fast'")) { try VerifyBenchmark.parse(["--fast"]) }
        #expect(VerifyBenchmark.peakRSSKilobytes() ?? 0 > 0)
    }
}
