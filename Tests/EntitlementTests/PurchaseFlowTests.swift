import EntitlementModel
import Foundation
import Testing
@testable import AppStore
@testable import EntitlementService
@testable import FakeAppStore
@testable import ServiceRuntime

/// End to end: receipts posted over HTTP to the real service, verified by the fake App Store, recorded in
/// PostgreSQL, read back as entitlements.
@Suite(.serialized, .timeLimit(.minutes(3)))
@Loop
struct PurchaseFlowTests {
    let now = Date()

    private func receipt(_ environment: StoreEnvironment = .production, _ build: (inout FakeReceipt) -> Void) -> FakeReceipt {
        var receipt = FakeReceipt(bundleID: ServiceHarness.bundleID, environment: environment)
        build(&receipt)
        return receipt
    }

    @Test func eachProductTypeYieldsItsEntitlement() async throws {
        try await ServiceHarness.run { service in
            let purchase = receipt { r in
                r.addPurchase("com.example.lifetime", transactionID: "nc-1", purchased: now.addingTimeInterval(-3600))
                r.addPurchase("com.example.coins.100", transactionID: "coin-1", purchased: now.addingTimeInterval(-60), quantity: 2)
                r.addPurchase("com.example.pass.month", transactionID: "pass-1", purchased: now.addingTimeInterval(-86_400))
                r.addPurchase("com.example.pass.month", transactionID: "pass-2", purchased: now.addingTimeInterval(-3600))
                r.addSubscription("com.example.premium.monthly", originalTransactionID: "sub-1", start: now.addingTimeInterval(-86_400), period: try! ISODuration(parsing: "P1M"))
            }
            let answer = try await service.post(purchase, for: "types-user")
            #expect(answer.status == 200, "\(answer.text)")
            let body = try answer.json()
            #expect(body["status"] as? String == "verified")
            #expect(body["environment"] as? String == "Production")
            #expect(body["verification_id"] is String)
            #expect(body.entitlement("pro")?["active"] as? Bool == true)
            #expect(body.entitlement("pro")?["expires_at"] is NSNull)
            #expect(body.entitlement("pro")?["product_type"] as? String == "non_consumable")
            #expect((body["consumables"] as? [String: Any])?["coins"] as? Int == 200)
            let premium = try #require(body.entitlement("premium"))
            #expect(premium["active"] as? Bool == true)
            #expect(premium["will_renew"] as? Bool == true)
            #expect(premium["original_transaction_id"] as? String == "sub-1")
            // Two one-month passes stack: the second starts when the first ends.
            let pass = try #require(body.entitlement("pass"))
            let expected = try ISODuration(parsing: "P1M").adding(to: try ISODuration(parsing: "P1M").adding(to: now.addingTimeInterval(-86_400)))
            #expect(pass["expires_at"] as? String == RFC3339.string(from: expected))
        }
    }

    @Test func sandboxReceiptIsVerifiedAfterOneRedirect() async throws {
        try await ServiceHarness.run { service in
            let purchase = receipt(.sandbox) { $0.addPurchase("com.example.lifetime", transactionID: "sb-1", purchased: now) }
            let answer = try await service.post(purchase, for: "sandbox-user")
            #expect(answer.status == 200)
            #expect(try answer.json()["environment"] as? String == "Sandbox")
            #expect(service.fake.state.counts[.production] == 1 && service.fake.state.counts[.sandbox] == 1)
        }
    }

    @Test func status21006StillRecordsTheExpiredSubscription() async throws {
        try await ServiceHarness.run { service in
            let expired = receipt { r in
                r.addSubscription("com.example.premium.monthly", originalTransactionID: "exp-1", start: now.addingTimeInterval(-90 * 86_400),
                                  period: try! ISODuration(parsing: "P1M"), willRenew: false)
            }
            guard case .object(var body) = expired.verifyReceiptBody(receiptData: expired.receiptData, requestDate: now, excludeOldTransactions: false) else {
                Issue.record("the fake's body is not an object"); return
            }
            body["status"] = 21006
            try service.program(expired.receiptData, production: [["body": .object(body)]])
            let answer = try await service.post(expired, for: "expired-user")
            #expect(answer.status == 200, "\(answer.text)")
            let premium = try #require(try answer.json().entitlement("premium"))
            #expect(premium["active"] as? Bool == false)
            #expect(premium["inactive_reason"] as? String == "expired")
        }
    }

    @Test func refundEndsAccessAndDebitsTheConsumable() async throws {
        try await ServiceHarness.run { service in
            var purchase = receipt { r in
                r.addPurchase("com.example.lifetime", transactionID: "rf-1", purchased: now.addingTimeInterval(-7200))
                r.addPurchase("com.example.coins.100", transactionID: "rf-coin", purchased: now.addingTimeInterval(-7200))
            }
            #expect(try await service.post(purchase, for: "refund-user").status == 200)
            purchase.cancel(transactionID: "rf-1", at: now.addingTimeInterval(-60))
            purchase.cancel(transactionID: "rf-coin", at: now.addingTimeInterval(-60))
            purchase.applicationVersion = "2"  // a new receipt blob, as the device would send after the refund
            let answer = try await service.post(purchase, for: "refund-user")
            #expect(answer.status == 200)
            let body = try answer.json()
            #expect(body.entitlement("pro")?["active"] as? Bool == false)
            #expect(body.entitlement("pro")?["inactive_reason"] as? String == "refunded")
            #expect((body["consumables"] as? [String: Any])?["coins"] as? Int == 0)
            // Posting the refunded receipt again debits nothing more.
            purchase.applicationVersion = "3"
            #expect(try await service.post(purchase, for: "refund-user").status == 200)
            #expect((try await service.entitlements("refund-user")["consumables"] as? [String: Any])?["coins"] as? Int == 0)
        }
    }

    @Test func aConsumableFirstSeenRefundedIsNeverCreditedByAnOlderReceipt() async throws {
        try await ServiceHarness.run { service in
            let older = receipt { $0.addPurchase("com.example.coins.100", transactionID: "late-coin", purchased: now.addingTimeInterval(-7200)) }
            var refunded = older
            refunded.cancel(transactionID: "late-coin", at: now.addingTimeInterval(-60))
            refunded.applicationVersion = "2"
            #expect(try await service.post(refunded, for: "late-user").status == 200)
            #expect(try await service.post(older, for: "late-user").status == 200)
            let balances = try await service.entitlements("late-user")["consumables"] as? [String: Any]
            #expect((balances?["coins"] as? Int ?? 0) == 0)
            #expect(try await service.sql("SELECT kind FROM consumable_ledger WHERE transaction_id = 'late-coin'").isEmpty)
        }
    }

    @Test func transactionsListWhatTheUserOwnsNewestFirst() async throws {
        try await ServiceHarness.run { service in
            let purchase = receipt { r in
                r.addPurchase("com.example.lifetime", transactionID: "tx-old", purchased: now.addingTimeInterval(-7200))
                r.addPurchase("com.example.coins.100", transactionID: "tx-new", purchased: now.addingTimeInterval(-60))
            }
            #expect(try await service.post(purchase, for: "lister").status == 200)
            let answer = try await service.request("GET", "/v1/users/lister/transactions")
            #expect(answer.status == 200)
            let body = try answer.json()
            #expect(body["user_id"] as? String == "lister")
            let transactions = try #require(body["transactions"] as? [[String: Any]])
            #expect(transactions.map { $0["transaction_id"] as? String } == ["tx-new", "tx-old"])
            let newest = try #require(transactions.first)
            #expect(newest["product_id"] as? String == "com.example.coins.100")
            #expect(newest["original_transaction_id"] as? String == "tx-new")
            #expect(newest["environment"] as? String == "Production")
            #expect(newest["original_purchase_date"] is String)
            #expect(newest["cancellation_date"] is NSNull)
            #expect(newest["is_in_intro_offer_period"] as? Bool == false)
            #expect(try await service.request("GET", "/v1/users/nobody/transactions").json()["transactions"] as? [Any] != nil)
        }
    }

    @Test func gracePeriodKeepsAccess() async throws {
        try await ServiceHarness.run { service in
            let lapsed = receipt { r in
                r.addSubscription("com.example.premium.monthly", originalTransactionID: "gr-1", start: now.addingTimeInterval(-32 * 86_400),
                                  period: try! ISODuration(parsing: "P1M"))
                r.enterBillingRetry(originalTransactionID: "gr-1", gracePeriodEnds: now.addingTimeInterval(3 * 86_400))
            }
            let answer = try await service.post(lapsed, for: "grace-user")
            #expect(answer.status == 200)
            let premium = try #require(try answer.json().entitlement("premium"))
            #expect(premium["active"] as? Bool == true)
            #expect(premium["in_grace_period"] as? Bool == true)
            #expect(premium["in_billing_retry"] as? Bool == true)
        }
    }

    @Test func aSecondUserTakesThePurchaseUnderTransfer() async throws {
        try await ServiceHarness.run(["RESTORE_POLICY": "transfer"]) { service in
            let purchase = receipt { $0.addPurchase("com.example.lifetime", transactionID: "tr-1", purchased: now) }
            #expect(try await service.post(purchase, for: "first-owner").status == 200)
            let answer = try await service.post(purchase, for: "second-owner")
            #expect(answer.status == 200)
            #expect(try answer.json()["transferred_from"] as? String == "first-owner")
            #expect(try await service.entitlements("second-owner").entitlement("pro")?["active"] as? Bool == true)
            #expect(try await service.entitlements("first-owner").entitlement("pro") == nil)
            let audit = try await service.sql("SELECT actor, before->>'user_id' AS from_user, after->>'user_id' AS to_user FROM audit_events WHERE action = 'ownership.transfer'")
            #expect(audit.count == 1)
            #expect(try audit.first?.string("from_user") == "first-owner" && audit.first?.string("to_user") == "second-owner")
            #expect(try audit.first?.string("actor") == "app#1")
        }
    }

    /// Under `transfer` the latest restore wins, whatever order Apple's answers come in: a post verified late
    /// (Apple down meanwhile) does not take back what another user restored after it, and a later post verified
    /// first is moved on to by nothing older.
    @Test func aLateVerifiedOlderPostDoesNotTakeBackALaterRestore() async throws {
        try await ServiceHarness.run(["RESTORE_POLICY": "transfer"]) { service in
            // u1 posts while Apple is down (pending); u2 posts the same purchase once Apple is back (verified
            // at once); then u1's submission is verified by the retry worker.
            let first = receipt { $0.addPurchase("com.example.lifetime", transactionID: "late-1", purchased: now) }
            service.appleOutage(true)
            let pending = try await service.post(first, for: "late-u1", waitMs: 0)
            #expect(pending.status == 202, "\(pending.text)")
            let id = try #require(try pending.json()["verification_id"] as? String)
            service.appleOutage(false)
            #expect(try await service.post(first, for: "late-u2").status == 200)
            #expect(try await service.awaitResolution(id)["status"] as? String == "verified")
            #expect(try await service.entitlements("late-u2").entitlement("pro")?["active"] as? Bool == true)
            #expect(try await service.entitlements("late-u1").entitlement("pro") == nil)

            // Both posted while Apple is down, u1 first: whichever is verified first, u2 (the later post) ends up owning it.
            let second = receipt { $0.addPurchase("com.example.lifetime", transactionID: "late-2", purchased: now) }
            service.appleOutage(true)
            let older = try await service.post(second, for: "late-u1", waitMs: 0)
            let newer = try await service.post(second, for: "late-u2", waitMs: 0)
            service.appleOutage(false)
            for answer in [older, newer] {
                #expect(try await service.awaitResolution(try #require(try answer.json()["verification_id"] as? String))["status"] as? String == "verified")
            }
            let owner = try await service.sql("SELECT user_id FROM purchase_owners WHERE original_transaction_id = 'late-2'")
            #expect(try owner.first?.string("user_id") == "late-u2")

            // The owner restoring again is the latest post: another user's older post, verified after, takes nothing.
            // (A space after the base64 gives the other user's copy of the receipt its own answer: Apple slow.)
            let third = receipt { $0.addPurchase("com.example.lifetime", transactionID: "late-3", purchased: now) }
            #expect(try await service.post(third, for: "late-b1").status == 200)
            let slowCopy = third.receiptData + " "
            try service.program(slowCopy, production: [["delay_ms": 1_500]])
            let waiting = try await service.post(receiptData: slowCopy, for: "late-b2", waitMs: 0)
            #expect(waiting.status == 202, "\(waiting.text)")
            #expect(try await service.post(third, for: "late-b1").status == 200)
            #expect(try await service.awaitResolution(try #require(try waiting.json()["verification_id"] as? String))["status"] as? String == "verified")
            #expect(try await service.sql("SELECT user_id FROM purchase_owners WHERE original_transaction_id = 'late-3'").first?.string("user_id") == "late-b1")

            // A repost while the first post's verification is under way is the latest post too, read when recording.
            let fourth = receipt { $0.addPurchase("com.example.lifetime", transactionID: "late-4", purchased: now) }
            let slowFourth = fourth.receiptData + " "
            try service.program(slowFourth, production: [["delay_ms": 1_500]])
            let first4 = try await service.post(receiptData: slowFourth, for: "late-c1", waitMs: 0)
            #expect(first4.status == 202, "\(first4.text)")
            #expect(try await service.post(fourth, for: "late-c2").status == 200)
            let again = try await service.post(receiptData: slowFourth, for: "late-c1", waitMs: 10_000)
            #expect(again.status == 200, "\(again.text)")
            #expect(try await service.sql("SELECT user_id FROM purchase_owners WHERE original_transaction_id = 'late-4'").first?.string("user_id") == "late-c1")
        }
    }


    /// A consumable quantity no store sells (its credit past 10^12) is not credited, and nothing traps: the
    /// receipt is verified and the service goes on serving.
    @Test func anAbsurdConsumableQuantityIsNotCreditedAndTrapsNothing() async throws {
        try await ServiceHarness.run { service in
            let absurd = receipt { $0.addPurchase("com.example.coins.100", transactionID: "huge-1", purchased: now, quantity: 100_000_000_000_000_000) }
            let answer = try await service.post(absurd, for: "huge-user")
            #expect(answer.status == 200, "\(answer.text)")
            #expect((try answer.json()["consumables"] as? [String: Any])?["coins"] == nil)
            #expect(try await service.request("GET", "/healthz").status == 200)
        }
    }

    @Test func aSecondUserIsRefusedUnderKeep() async throws {
        try await ServiceHarness.run(["RESTORE_POLICY": "keep"]) { service in
            let purchase = receipt { $0.addPurchase("com.example.lifetime", transactionID: "kp-1", purchased: now) }
            #expect(try await service.post(purchase, for: "keeper").status == 200)
            let answer = try await service.post(purchase, for: "intruder")
            #expect(answer.status == 409)
            #expect(answer.headers["Content-Type"] == "application/problem+json")
            #expect(try answer.json()["original_transaction_id"] as? String == "kp-1")
            #expect(try await service.entitlements("keeper").entitlement("pro")?["active"] as? Bool == true)
            #expect(try await service.entitlements("intruder").entitlement("pro") == nil)

            // A consumable belongs to its first poster as much: refused too, its credit left where it was made.
            let coins = receipt { $0.addPurchase("com.example.coins.100", transactionID: "kp-c1", purchased: now) }
            #expect(try await service.post(coins, for: "keeper").status == 200)
            let coinAnswer = try await service.post(coins, for: "intruder")
            #expect(coinAnswer.status == 409)
            #expect(try coinAnswer.json()["original_transaction_id"] as? String == "kp-c1")
            #expect((try await service.entitlements("keeper")["consumables"] as? [String: Any])?["coins"] as? Int == 100)
            #expect((try await service.entitlements("intruder")["consumables"] as? [String: Any])?.isEmpty == true)
        }
    }

    /// Under `transfer` a consumable another user posted is not moved: its credit stays where it was made (it
    /// may be spent), and the answer names no previous owner.
    @Test func aConsumableCreditStaysWithItsFirstPosterUnderTransfer() async throws {
        try await ServiceHarness.run(["RESTORE_POLICY": "transfer"]) { service in
            let coins = receipt { $0.addPurchase("com.example.coins.100", transactionID: "tc-1", purchased: now) }
            #expect(try await service.post(coins, for: "first-owner").status == 200)
            let answer = try await service.post(coins, for: "second-owner")
            #expect(answer.status == 200)
            #expect(try answer.json()["transferred_from"] == nil)
            #expect((try await service.entitlements("first-owner")["consumables"] as? [String: Any])?["coins"] as? Int == 100)
            #expect((try await service.entitlements("second-owner")["consumables"] as? [String: Any])?.isEmpty == true)
            #expect(try await service.sql("SELECT 1 FROM audit_events WHERE action = 'ownership.transfer'").isEmpty)
        }
    }

    @Test func fiftyConcurrentPostsOfOneConsumableCreditOnce() async throws {
        try await ServiceHarness.run { service in
            let purchase = receipt { $0.addPurchase("com.example.coins.100", transactionID: "c50-1", purchased: now) }
            let posts = (0..<50).map { _ in Task { try await service.post(purchase, for: "coin-user").status } }
            var statuses: [Int] = []
            for post in posts { statuses.append(try await post.value) }
            #expect(statuses.allSatisfy { $0 == 200 || $0 == 202 }, "\(statuses)")
            let rows = try await service.sql("SELECT count(*)::int AS n FROM consumable_ledger WHERE transaction_id = 'c50-1'")
            #expect(try rows.first?.int("n") == 1)
            #expect((try await service.entitlements("coin-user")["consumables"] as? [String: Any])?["coins"] as? Int == 100)
        }
    }

    @Test func anOrderTokenBindsThePurchaseToTheBuyer() async throws {
        try await ServiceHarness.run(["RESTORE_POLICY": "keep"]) { service in
            let order = try await service.request("POST", "/v1/orders", json: #"{"user_id": "buyer", "product_id": "com.example.lifetime"}"#)
            #expect(order.status == 201)
            let orderBody = try order.json()
            let token = try #require(orderBody["app_account_token"] as? String)
            let orderID = try #require(orderBody["order_id"] as? String)
            let purchase = receipt { $0.addPurchase("com.example.lifetime", transactionID: "ord-1", purchased: now, appAccountToken: token.uppercased()) }
            let answer = try await service.post(purchase, for: "somebody-else")
            #expect(answer.status == 200)
            #expect(try await service.entitlements("buyer").entitlement("pro")?["active"] as? Bool == true)
            #expect(try await service.entitlements("somebody-else").entitlement("pro") == nil)
            let fulfilled = try await service.request("GET", "/v1/orders/\(orderID)").json()
            #expect(fulfilled["status"] as? String == "fulfilled")
            #expect(fulfilled["transaction_id"] as? String == "ord-1")
        }
    }

    /// An order's `order_id` fulfils it with a purchase made for it: one given on a repost of a submission still
    /// pending (Apple down at the first post) counts; a purchase bought before the order was made does not.
    @Test func anOrderIsFulfilledByAPurchaseMadeForItPostedWithItsID() async throws {
        try await ServiceHarness.run { service in
            let create = { (user: String) in
                try #require(try await service.request("POST", "/v1/orders", json: #"{"user_id": "\#(user)", "product_id": "com.example.lifetime"}"#)
                    .json()["order_id"] as? String)
            }
            let orderID = try await create("reposter")
            service.appleOutage(true)
            let purchase = receipt { $0.addPurchase("com.example.lifetime", transactionID: "ord-repost-1", purchased: now) }
            #expect(try await service.post(purchase, for: "reposter", waitMs: 0).status == 202)
            let repost = try await service.post(purchase, for: "reposter", waitMs: 0, orderID: orderID)
            #expect(repost.status == 202)
            service.appleOutage(false)
            _ = try await service.awaitResolution(try #require(try repost.json()["verification_id"] as? String))
            let fulfilled = try await service.request("GET", "/v1/orders/\(orderID)").json()
            #expect(fulfilled["status"] as? String == "fulfilled" && fulfilled["transaction_id"] as? String == "ord-repost-1", "\(fulfilled)")

            // Bought a day before the order: not the order's purchase.
            let late = try await create("old-buyer")
            let old = receipt { $0.addPurchase("com.example.lifetime", transactionID: "ord-old-1", purchased: now.addingTimeInterval(-86_400)) }
            #expect(try await service.post(old, for: "old-buyer", orderID: late).status == 200)
            #expect(try await service.request("GET", "/v1/orders/\(late)").json()["status"] as? String == "created")
        }
    }

    @Test func appleDownMeansPendingThenVerifiedByTheWorker() async throws {
        try await ServiceHarness.run { service in
            service.appleOutage(true)
            let purchase = receipt { $0.addPurchase("com.example.lifetime", transactionID: "down-1", purchased: now) }
            let answer = try await service.post(purchase, for: "patient-user", waitMs: 2_000)
            #expect(answer.status == 202)
            let id = try #require(try answer.json()["verification_id"] as? String)
            let pending = try await service.request("GET", "/v1/receipts/\(id)").json()
            #expect(pending["status"] as? String == "pending")
            service.appleOutage(false)
            let resolved = try await service.awaitResolution(id)
            #expect(resolved["status"] as? String == "verified")
            #expect((resolved["attempts"] as? Int ?? 0) >= 2)
            #expect(try await service.entitlements("patient-user").entitlement("pro")?["active"] as? Bool == true)
        }
    }

    @Test func rejectedReceiptsAnswer422AndGrantNothing() async throws {
        try await ServiceHarness.run { service in
            let bogus = FakeReceipt(bundleID: ServiceHarness.bundleID).receiptData
            try service.program(bogus, production: [["status": 21003]])
            let answer = try await service.post(FakeReceipt(receiptData: bogus)!, for: "rejected-user")
            #expect(answer.status == 422)
            #expect(try answer.json()["apple_status"] as? Int == 21003)
            let otherApp = FakeReceipt(bundleID: "com.someone.else") .with { $0.addPurchase("com.example.lifetime", transactionID: "oa-1", purchased: now) }
            let foreign = try await service.post(otherApp, for: "rejected-user")
            #expect(foreign.status == 422)
            // Apple answered (0) before the bundle was found to be another app's: the problem carries its status.
            #expect(try foreign.json()["apple_status"] as? Int == 0)
            #expect(try await service.entitlements("rejected-user").entitlement("pro") == nil)
            let malformed = try await service.request("POST", "/v1/receipts", json: #"{"user_id": "rejected-user", "receipt_data": "%%% not base64"}"#)
            #expect(malformed.status == 422)
        }
    }

    /// A real receipt of another app (the shared samples': a PKCS#7 app receipt and an iOS 6 transaction receipt)
    /// reads as such locally: refused at once, naming the field, with nothing stored and Apple never asked.
    @Test func aRealReceiptOfAnotherAppIsRefusedWithoutAskingApple() async throws {
        try await ServiceHarness.run { service in
            for (sample, bundle) in [("receipt_sandbox_autorenew_monthly_to_annual_revenuecat.b64", "com.revenuecat.sampleapp"),
                                     ("receipt_ios6_transaction_sandbox_mindmob_inapppurchase.b64", "com.mindmobapp.MindMob")] {
                let receiptData = String(decoding: try Fixtures.data(sample), as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
                let body = String(decoding: try JSONEncoder().encode(["user_id": "foreign-user", "receipt_data": receiptData]), as: UTF8.self)
                let answer = try await service.request("POST", "/v1/receipts", json: body)
                #expect(answer.status == 422, "\(sample): \(answer.text)")
                #expect(answer.headers["Content-Type"] == "application/problem+json")
                let problem = try answer.json()
                #expect(problem["field"] as? String == "receipt_data")
                #expect(problem["detail"] as? String == "receipt is for \(bundle), not \(ServiceHarness.bundleID)")
                #expect(problem["verification_id"] == nil && problem["apple_status"] == nil)
            }
            #expect(service.fake.state.counts.values.reduce(0, +) == 0)
            #expect(try await service.sql("SELECT count(*) AS n FROM receipt_submissions").first?.int("n") == 0)
        }
    }

    @Test func wrongSharedSecretAnswers502AndKeepsTheSubmission() async throws {
        try await ServiceHarness.run(["APPLE_SHARED_SECRET": "not-the-right-secret"]) { service in
            let purchase = receipt { $0.addPurchase("com.example.lifetime", transactionID: "ss-1", purchased: now) }
            let answer = try await service.post(purchase, for: "secret-user")
            #expect(answer.status == 502)
            #expect(try answer.json()["apple_status"] as? Int == 21004)
            #expect(!answer.text.contains("not-the-right-secret"))
            let stored = try await service.sql("SELECT status FROM receipt_submissions WHERE user_id = 'secret-user'")
            #expect(try stored.first?.string("status") == "failed")
        }
    }

    @Test func productsMissingFromTheCatalogAreStoredAndReportedNeverGranted() async throws {
        try await ServiceHarness.run { service in
            let purchase = receipt { $0.addPurchase("com.example.mystery", transactionID: "unk-1", purchased: now) }
            let answer = try await service.post(purchase, for: "curious-user")
            #expect(answer.status == 200)
            let body = try answer.json()
            #expect((body["entitlements"] as? [String: Any])?.isEmpty == true)
            #expect(body["unknown_products"] as? [String] == ["com.example.mystery"])
            let stored = try await service.sql("SELECT product_id FROM app_store_transactions WHERE transaction_id = 'unk-1'")
            #expect(try stored.first?.string("product_id") == "com.example.mystery")
            // Always in the body: empty for a user whose every product the catalog knows (or who has none).
            #expect(try await service.entitlements("nobody-yet")["unknown_products"] as? [String] == [])
        }
    }
}

extension FakeReceipt {
    /// A copy changed by `build`.
    func with(_ build: (inout FakeReceipt) -> Void) -> FakeReceipt {
        var copy = self
        build(&copy)
        return copy
    }
}
