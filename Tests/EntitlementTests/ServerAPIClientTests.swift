import Crypto
import EntitlementModel
import Foundation
import Testing
@testable import AppStore
@testable import FakeAppStore
@testable import ServiceRuntime

/// The App Store Server API client against the fake App Store's Server API over real HTTP on the loop: every
/// endpoint, paging, the Sandbox fallback, Apple's shared 429 wait, retries, timeouts, refused keys and
/// answers that do not verify.
@Suite(.timeLimit(.minutes(1))) struct ServerAPIClientTests {
    static let nowhere = "http://127.0.0.1:1/notifications"

    /// A Sandbox subscription renewed once, and a consumable and a non-consumable bought in one order, all
    /// of one customer; returns (subscription original id, its transaction ids, the consumable's answer,
    /// the non-consumable's answer).
    @Loop static func shop(_ fake: FakeAppStoreHarness, customer: String = "alice") async throws -> (String, [String], JSONValue, JSONValue) {
        let subscription = try await fake.buy([
            "product_id": "com.example.monthly", "type": "auto_renewable", "customer": .string(customer),
            "notify": ["url": .string(nowhere)],
        ])
        let original = try #require(subscription[member: "original_transaction_id"]?.text)
        let renewal = try await fake.change(original, "renew", ["notify": ["url": .string(nowhere)]])
        let coins = try await fake.buy(["product_id": "com.example.coins", "type": "consumable", "customer": .string(customer)])
        let lifetime = try await fake.buy([
            "product_id": "com.example.lifetime", "type": "non_consumable", "customer": .string(customer),
            "order_id": try #require(coins[member: "order_id"]),
        ])
        return (original, [original, try #require(renewal[member: "transaction_id"]?.text)], coins, lifetime)
    }

    @Test @Loop func everyEndpointAnswersFromTheStoreAfterProductionSaysNotFound() async throws {
        try await FakeAppStoreHarness.run { fake in
            let (original, periods, coins, lifetime) = try await Self.shop(fake)
            _ = try await fake.buy(["product_id": "com.example.other", "type": "consumable", "customer": "bob"])
            let client = fake.serverAPIClient()
            let coinsID = try #require(coins[member: "transaction_id"]?.text)

            guard case .answered(let info, .sandbox) = await client.transactionInfo(coinsID) else { Issue.record("transaction info"); return }
            #expect(info.payload.transaction.transactionID == coinsID && info.payload.environment == .sandbox)
            #expect(info.jws.split(separator: ".").count == 3 && info.signedDate != nil)

            guard case .answered(let history, .sandbox) = await client.transactionHistory(coinsID) else { Issue.record("history"); return }
            let lifetimeID = try #require(lifetime[member: "transaction_id"]?.text)
            #expect(Set(history.map(\.payload.transaction.transactionID)) == Set(periods + [coinsID, lifetimeID]))

            guard case .answered(let statuses, .sandbox) = await client.subscriptionStatuses(coinsID) else { Issue.record("statuses"); return }
            let status = try #require(statuses.first)
            #expect(statuses.count == 1 && status.status == .active && status.rawStatus == 1 && status.originalTransactionID == original)
            #expect(status.subscriptionGroupIdentifier == "21345678")
            #expect(status.transaction?.payload.transaction.transactionID == periods[1])
            #expect(status.renewalInfo?.payload.renewal.willRenew == true && status.renewalInfo?.payload.renewal.originalTransactionID == original)

            guard case .answered(let order, .sandbox) = await client.lookUpOrder(try #require(coins[member: "order_id"]?.text)) else {
                Issue.record("order"); return
            }
            #expect(Set(order.map(\.payload.transaction.transactionID)) == [coinsID, lifetimeID])

            let now = Date()
            guard case .answered(let notifications, .sandbox) = await client.notificationHistory(
                environment: .sandbox, start: now.addingTimeInterval(-3_600), end: now.addingTimeInterval(60)) else {
                Issue.record("notification history"); return
            }
            #expect(notifications.map(\.notification.payload.notificationType) == ["SUBSCRIBED", "DID_RENEW"])
            #expect(notifications.allSatisfy { $0.sendAttempts.map(\.sendAttemptResult) == ["NO_RESPONSE"] && $0.sendAttempts[0].attemptDate != nil })
            #expect(notifications.allSatisfy { $0.notification.payload.signedTransactionInfo != nil })
            guard case .answered(let none, .production) = await client.notificationHistory(
                environment: .production, start: now.addingTimeInterval(-3_600), end: now.addingTimeInterval(60)) else {
                Issue.record("Production notification history"); return
            }
            #expect(none.isEmpty)
            // Each purchase call asked Production first (Sandbox's purchase is unknown there), then Sandbox;
            // notification history stays in the environment asked.
            #expect(try await fake.serverAPITrail() == [
                "Production transaction_info 404", "Sandbox transaction_info 200",
                "Production transaction_history 404", "Sandbox transaction_history 200",
                "Production subscription_statuses 404", "Sandbox subscription_statuses 200",
                "Production order_lookup 200", "Sandbox order_lookup 200",
                "Sandbox notification_history 200", "Production notification_history 200",
            ])
        }
    }

    @Test @Loop func historyReadsEveryPageInOrder() async throws {
        try await FakeAppStoreHarness.run { fake in
            let start = Int(Date().timeIntervalSince1970 * 1_000) - 90 * 86_400_000
            let first = try await fake.buy(["product_id": "com.example.weekly", "type": "auto_renewable", "environment": "Production",
                                            "purchase_date": .int(start), "period": "P1D"])
            let original = try #require(first[member: "original_transaction_id"]?.text)
            var expected = [original]
            for _ in 0..<44 { expected.append(try #require(try await fake.change(original, "renew")[member: "transaction_id"]?.text)) }
            let client = fake.serverAPIClient()
            guard case .answered(let history, .production) = await client.transactionHistory(expected[17]) else { Issue.record("history"); return }
            #expect(history.map(\.payload.transaction.transactionID) == expected)
            #expect(try await fake.serverAPITrail() == Array(repeating: "Production transaction_history 200", count: 3))
            let paths = try await fake.serverAPIRequests().compactMap { $0[member: "path"]?.text }
            #expect(paths[0] == "/inApps/v2/history/\(expected[17])" && paths[1].hasPrefix(paths[0] + "?revision="))
        }
    }

    @Test @Loop func unknownIdsAndOrdersAreNotFoundInEitherEnvironment() async throws {
        try await FakeAppStoreHarness.run { (fake) throws in
            let client = fake.serverAPIClient()
            #expect(await client.transactionInfo("1000000000000001") == .notFound)
            #expect(await client.subscriptionStatuses("1000000000000001") == .notFound)
            #expect(await client.lookUpOrder("MNOSUCHORDER") == .notFound)
            #expect(try await fake.serverAPITrail() == [
                "Production transaction_info 404", "Sandbox transaction_info 404",
                "Production subscription_statuses 404", "Sandbox subscription_statuses 404",
                "Production order_lookup 200", "Sandbox order_lookup 200",
            ])
            // Ids that cannot be Apple's never leave the process.
            guard case .rejected(nil, _) = await client.transactionInfo("../lookup/x") else { Issue.record("not rejected"); return }
            guard case .rejected(nil, _) = await client.lookUpOrder("") else { Issue.record("not rejected"); return }
            #expect(try await fake.serverAPITrail().count == 6)
        }
    }

    @Test @Loop func aProductionPurchaseIsAnsweredByProductionAlone() async throws {
        try await FakeAppStoreHarness.run { fake in
            let bought = try await fake.buy(["product_id": "com.example.lifetime", "type": "non_consumable", "environment": "Production"])
            let id = try #require(bought[member: "transaction_id"]?.text)
            let client = fake.serverAPIClient()
            #expect(await client.transactionInfo(id).answer?.payload.environment == .production)
            // A caller that knows the purchase is Sandbox's starts there, and Sandbox's "not found" is final.
            #expect(await client.transactionInfo(id, firstEnvironment: .sandbox) == .notFound)
            #expect(try await fake.serverAPITrail() == ["Production transaction_info 200", "Sandbox transaction_info 404"])
        }
    }

    @Test @Loop func aKeyRefusedByBothEnvironmentsIsAConfigurationErrorLoggedOnce() async throws {
        try await FakeAppStoreHarness.run { fake in
            let (_, periods, _, _) = try await Self.shop(fake)
            let other = P256.Signing.PrivateKey()
            let client = fake.serverAPIClient(key: other)
            let (results, output) = try await capturingStandardError {
                (await client.transactionInfo(periods[0]), await client.subscriptionStatuses(periods[0]))
            }
            guard case .configurationError = results.0, case .configurationError = results.1 else { Issue.record("\(results)"); return }
            #expect(output.components(separatedBy: "apple_api_configuration_error").count == 2)
            // Neither the key nor a token reached the log.
            #expect(!output.contains(String(other.pemRepresentation.split(separator: "\n")[1])) && !output.contains("eyJ"))
            let refusals = try await fake.serverAPIRequests().compactMap { $0[member: "refusal"]?.text }
            #expect(refusals.count == 4 && refusals.allSatisfy { $0.contains("signature") })
        }
    }

    @Test @Loop func productionRefusingTheKeyFallsBackToSandbox() async throws {
        try await FakeAppStoreHarness.run { fake in
            let (_, periods, _, _) = try await Self.shop(fake)
            try await fake.serverAPIScenario(nil, .production, [["status": 401]])
            let client = fake.serverAPIClient()
            #expect(await client.transactionInfo(periods[1]).answer?.payload.transaction.transactionID == periods[1])
            // Production's 401 and Sandbox's "not found" together are a configuration error, not "not found".
            try await fake.serverAPIScenario(nil, .production, [["status": 401]])
            guard case .configurationError = await client.transactionInfo("1000000000000001") else { Issue.record("not a configuration error"); return }
        }
    }

    @Test @Loop func tokensCarryTheClaimsAndVerifyWithThePublicKey() async throws {
        try await FakeAppStoreHarness.run { fake in
            let credentials = fake.credentials()
            let before = Date().timeIntervalSince1970.rounded(.down)
            let token = credentials.token()
            let jws = try CompactJWS(token)
            #expect(jws.algorithm == "ES256" && jws.keyID == credentials.keyID && jws.type == "JWT")
            let claims = try ServerAPIToken(jws)
            #expect(claims.issuerID == credentials.issuerID && claims.bundleID == fake.fake.configuration.bundleID)
            #expect(claims.audience == "appstoreconnect-v1")
            let issued = try #require(claims.issuedAt).timeIntervalSince1970
            #expect(issued >= before && issued <= Date().timeIntervalSince1970 && claims.expiresAt.timeIntervalSince1970 - issued == 300)
            let signature = try P256.Signing.ECDSASignature(rawRepresentation: jws.signature)
            #expect(fake.fake.serverAPIKey.publicKey.isValidSignature(signature, for: Data(jws.signingInput)))
            #expect(!P256.Signing.PrivateKey().publicKey.isValidSignature(signature, for: Data(jws.signingInput)))
            #expect(credentials.token() != token || Date().timeIntervalSince1970.rounded(.down) == before)
            #expect(!credentials.description.contains("PRIVATE"))

            // What the fake read from the client's own requests: a fresh token each, accepted.
            let client = fake.serverAPIClient()
            _ = await client.transactionInfo("1000000000000001")
            for request in try await fake.serverAPIRequests() {
                #expect(request[member: "refusal"] == .null)
                #expect(request[member: "token"]?[member: "kid"]?.text == credentials.keyID)
                #expect(request[member: "token"]?[member: "aud"]?.text == "appstoreconnect-v1")
                #expect(request[member: "token"]?[member: "bid"]?.text == credentials.bundleID)
                #expect(request[member: "token"]?[member: "iss"]?.text == credentials.issuerID)
            }
        }
    }

    @Test @Loop func aRateLimitHoldsEveryEndpointUntilRetryAfter() async throws {
        try await FakeAppStoreHarness.run { fake in
            let (original, _, _, _) = try await Self.shop(fake)
            try await fake.serverAPIScenario(.transactionInfo, .production, [["status": 429, "retry_after_ms": 700]])
            let client = fake.serverAPIClient()
            let asked = Date()
            guard case .rateLimited(let until, 4_290_000?) = await client.transactionInfo(original, waitMs: 200) else { Issue.record("not rate limited"); return }
            #expect(until > asked.addingTimeInterval(0.5) && until < asked.addingTimeInterval(1.5))
            // Another endpoint, with too little time to wait, is held too and sends nothing: Apple answered it nothing.
            #expect(await client.subscriptionStatuses(original, waitMs: 100) == .rateLimited(until: until, appleStatus: nil))
            #expect(try await fake.serverAPITrail() == ["Production transaction_info 429"])
            // With time enough, the call waits for Apple's time, then goes on.
            #expect(await client.subscriptionStatuses(original).answer?.count == 1)
            #expect(Date() >= until)
            #expect(try await fake.serverAPITrail().count == 3)
        }
    }

    @Test @Loop func aRetryAfterAlreadyPastStillHoldsRequestsForASecond() async throws {
        try await FakeAppStoreHarness.run { fake in
            let bought = try await fake.buy(["product_id": "com.example.lifetime", "type": "non_consumable", "environment": "Production"])
            try await fake.serverAPIScenario(.transactionInfo, .production, [["status": 429, "retry_after": "1500000000000"]])
            let client = fake.serverAPIClient()
            let started = Date()
            #expect(await client.transactionInfo(try #require(bought[member: "transaction_id"]?.text), waitMs: 3_000).answer != nil)
            #expect(Date().timeIntervalSince(started) >= 1)
            #expect(try await fake.serverAPITrail() == ["Production transaction_info 429", "Production transaction_info 200"])
        }
    }

    @Test @Loop func retryableAnswersAreRetriedWhileTheCallHasTime() async throws {
        try await FakeAppStoreHarness.run { fake in
            let (original, _, _, _) = try await Self.shop(fake)
            try await fake.serverAPIScenario(.subscriptionStatuses, .sandbox, [
                ["error_code": 5_000_001], ["error_code": 4_040_002], ["status": 503], ["error_code": 4_040_006], ["drop": true],
            ])
            let client = fake.serverAPIClient()
            #expect(await client.subscriptionStatuses(original).answer?.first?.status == .active)
            #expect(try await fake.serverAPITrail() == [
                "Production subscription_statuses 404", "Sandbox subscription_statuses 500", "Sandbox subscription_statuses 404",
                "Sandbox subscription_statuses 503", "Sandbox subscription_statuses 404", "Sandbox subscription_statuses -",
                "Sandbox subscription_statuses 200",
            ])
            // Without the time for a retry the call ends, saying when to ask again.
            try await fake.serverAPIScenario(.subscriptionStatuses, .sandbox, [["error_code": 5_000_001]])
            let slow = fake.serverAPIClient(retry: RetrySchedule(baseMs: 5_000, maxMs: 5_000))
            guard case .retryLater(let until?, let detail, 5_000_001?) = await slow.subscriptionStatuses(original, waitMs: 1_000) else {
                Issue.record("not retryLater"); return
            }
            #expect(until > Date() && detail.contains("5000001"))
        }
    }

    @Test @Loop func aSlowAppleIsATimeoutToRetryLater() async throws {
        try await FakeAppStoreHarness.run { fake in
            try await fake.configureServerAPI(["latency_ms": 2_000])
            let client = fake.serverAPIClient(timeoutMs: 150, retry: RetrySchedule(baseMs: 10_000, maxMs: 10_000))
            let started = Date()
            guard case .retryLater = await client.transactionInfo("1000000000000001", waitMs: 1_000) else { Issue.record("not retryLater"); return }
            #expect(Date().timeIntervalSince(started) < 1.5)
            // The call's time bounds the exchange too.
            let patient = fake.serverAPIClient(timeoutMs: 10_000, retry: RetrySchedule(baseMs: 10_000, maxMs: 10_000))
            let again = Date()
            guard case .retryLater = await patient.transactionInfo("1000000000000001", waitMs: 300) else { Issue.record("not retryLater"); return }
            #expect(Date().timeIntervalSince(again) < 1.5)
        }
    }

    @Test @Loop func rejectionsAndUnverifiableAnswersAreFinal() async throws {
        try await FakeAppStoreHarness.run { fake in
            let (original, _, _, _) = try await Self.shop(fake)
            try await fake.serverAPIScenario(.transactionInfo, nil, [["error_code": 4_000_006]])
            let client = fake.serverAPIClient()
            guard case .rejected(4_000_006?, _) = await client.transactionInfo(original) else { Issue.record("not rejected"); return }
            // Signed by a chain the client does not trust: nothing of the answer is used.
            let distrustful = fake.serverAPIClient(root: FakeSigningChain.make().root)
            guard case .unverified(let detail) = await distrustful.transactionInfo(original) else { Issue.record("not unverified"); return }
            #expect(detail.contains("does not verify"))
        }
    }

    @Test @Loop func aBacklogNeverTripsTheLimit() async throws {
        try await FakeAppStoreHarness.run { fake in
            let bought = try await fake.buy(["product_id": "com.example.coins", "type": "consumable"])
            let id = try #require(bought[member: "transaction_id"]?.text)
            // Apple's Sandbox limit for Get Transaction Info: 5 per second.
            try await fake.configureServerAPI(["rate_limit_per_second": 5])
            let client = fake.serverAPIClient()
            let calls = (0..<12).map { _ in Task { @Loop in await client.transactionInfo(id, firstEnvironment: .sandbox) } }
            for call in calls { #expect(await call.value.answer != nil) }
            #expect(try await fake.serverAPITrail() == Array(repeating: "Sandbox transaction_info 200", count: 12))
        }
    }
}
