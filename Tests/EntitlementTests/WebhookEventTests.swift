import EntitlementModel
import Foundation
import Testing
@testable import AppStore
@testable import EntitlementService
@testable import FakeAppStore
@testable import ServiceRuntime

/// Events written with each change, per write path, against PostgreSQL through the real service (no
/// `WEBHOOK_URL`: recorded with delivery `none`): grants and revocations, consumable purchases and spends,
/// purchases of each type, transfers for both users, expiration without any message, and nothing when the
/// answer does not change. Plus the customer view.
@Suite(.serialized, .timeLimit(.minutes(3)))
@Loop
struct WebhookEventTests {
    let now = Date()

    /// A user's events, oldest first: their type, sequence, body and delivery state.
    struct Row {
        var type: String
        var sequence: Int
        var body: [String: Any]
        var delivery: String
        var entitlements: [String: Any] { body["entitlements"] as? [String: Any] ?? [:] }
        var consumables: [String: Any] { body["consumables"] as? [String: Any] ?? [:] }
    }

    static func events(_ service: some ServiceDatabase, user: String) async throws -> [Row] {
        try await service.sql("""
            SELECT type, sequence, payload, delivery_status FROM webhook_events WHERE user_id = $1 ORDER BY sequence
            """, [user]).map { row in
            Row(type: try row.string("type"), sequence: try row.int("sequence"),
                body: try JSONSerialization.jsonObject(with: Data(try row.string("payload").utf8)) as! [String: Any],
                delivery: try row.string("delivery_status"))
        }
    }

    private func receipt(_ build: (inout FakeReceipt) -> Void) -> FakeReceipt {
        var receipt = FakeReceipt(bundleID: ServiceHarness.bundleID)
        build(&receipt)
        return receipt
    }

    private func grant(_ service: ServiceHarness, _ user: String, _ entitlement: String, extra: String = "") async throws -> String {
        let answer = try await service.request("POST", "/v1/admin/users/\(user)/grants",
                                               json: #"{"entitlement": "\#(entitlement)", "reason": "support"\#(extra)}"#, key: ServiceHarness.adminKey)
        #expect(answer.status == 201, "\(answer.text)")
        return try answer.json()["grant_id"] as? String ?? ""
    }

    @Test func grantsAndTheirRevocationWriteOneEventEach() async throws {
        try await ServiceHarness.run { service in
            let id = try await grant(service, "g-user", "premium")
            #expect(try await service.request("DELETE", "/v1/admin/grants/\(id)", key: ServiceHarness.adminKey).status == 200)
            #expect(try await service.request("DELETE", "/v1/admin/grants/\(id)", key: ServiceHarness.adminKey).status == 200)
            let events = try await Self.events(service, user: "g-user")
            #expect(events.map(\.type) == ["grant", "grant_revoked"], "a revocation repeated changes nothing")
            #expect(events.map(\.sequence) == [1, 2])
            #expect(events.allSatisfy { $0.delivery == "none" }, "no WEBHOOK_URL: recorded, not sent")
            let granted = try #require(events[0].entitlements["premium"] as? [String: Any])
            #expect(granted["active"] as? Bool == true && granted["grant_id"] as? String == id && granted["source"] as? String == "grant")
            #expect(events[0].body["product_id"] == nil && events[0].body["environment"] == nil && events[0].body["transaction_id"] == nil)
            #expect(events[0].body["user_id"] as? String == "g-user")
            let revoked = try #require(events[1].entitlements["premium"] as? [String: Any])
            #expect(revoked["active"] as? Bool == false && revoked["inactive_reason"] as? String == "revoked")
            // The event carries exactly what GET entitlements answers.
            let answer = try await service.entitlements("g-user")
            #expect(NSDictionary(dictionary: answer["entitlements"] as! [String: Any]).isEqual(to: events[1].entitlements))
        }
    }

    @Test func consumablePurchasesAndSpendsWriteEventsAndReplaysDoNot() async throws {
        try await ServiceHarness.run { service in
            let coins = receipt { $0.addPurchase("com.example.coins.100", transactionID: "coin-e1", purchased: now) }
            #expect(try await service.post(coins, for: "c-user").status == 200)
            #expect(try await service.post(coins, for: "c-user").status == 200)
            let spend = { (amount: Int, key: String) in
                try await service.request("POST", "/v1/users/c-user/consumables/coins/consume",
                                          json: #"{"amount": \#(amount), "idempotency_key": "\#(key)"}"#)
            }
            #expect(try await spend(30, "k1").status == 200)
            #expect(try await spend(30, "k1").status == 200)
            #expect(try await spend(1_000, "k2").status == 409)
            let events = try await Self.events(service, user: "c-user")
            #expect(events.map(\.type) == ["consumable_purchase", "consumable_spent"])
            #expect(events.map(\.sequence) == [1, 2])
            #expect(events[0].consumables["coins"] as? Int == 100 && events[1].consumables["coins"] as? Int == 70)
            #expect(events[0].body["product_id"] as? String == "com.example.coins.100")
            #expect(events[0].body["transaction_id"] as? String == "coin-e1")
            #expect(events[0].body["environment"] as? String == "Production")
            #expect(events[1].body["environment"] == nil && events[1].body["product_id"] == nil)
        }
    }

    @Test func eachPurchaseTypeNamesItsEventAndTheSameReceiptAgainWritesNothing() async throws {
        try await ServiceHarness.run { service in
            let cases: [(String, FakeReceipt, String, String)] = [
                ("sub-user", receipt { $0.addSubscription("com.example.premium.monthly", originalTransactionID: "sub-e1", start: now.addingTimeInterval(-60), period: ISODuration(months: 1)) },
                 "initial_purchase", "premium"),
                ("life-user", receipt { $0.addPurchase("com.example.lifetime", transactionID: "life-e1", purchased: now) }, "non_consumable_purchase", "pro"),
                ("pass-user", receipt { $0.addPurchase("com.example.pass.month", transactionID: "pass-e1", purchased: now) }, "non_renewing_purchase", "pass"),
            ]
            for (user, purchase, type, entitlement) in cases {
                #expect(try await service.post(purchase, for: user).status == 200)
                #expect(try await service.post(purchase, for: user).status == 200)
                let events = try await Self.events(service, user: user)
                #expect(events.map(\.type) == [type], "\(user)")
                let event = try #require(events.first)
                #expect(event.body["environment"] as? String == "Production")
                #expect(event.body["original_transaction_id"] is String && event.body["product_id"] is String && event.body["transaction_id"] is String)
                #expect((event.entitlements[entitlement] as? [String: Any])?["active"] as? Bool == true)
            }
        }
    }

    @Test func laterReceiptsNameCancellationUncancellationRenewalAndRefund() async throws {
        try await ServiceHarness.run { service in
            var purchase = receipt {
                $0.addSubscription("com.example.premium.monthly", originalTransactionID: "life-e1", start: now.addingTimeInterval(-86_400),
                                   period: ISODuration(days: 30))
            }
            #expect(try await service.post(purchase, for: "life-user").status == 200)
            purchase.updateRenewal(originalTransactionID: "life-e1") { $0.willRenew = false }
            #expect(try await service.post(purchase, for: "life-user").status == 200)
            purchase.updateRenewal(originalTransactionID: "life-e1") { $0.willRenew = true }
            #expect(try await service.post(purchase, for: "life-user").status == 200)
            // An early renewal: a new period of the same subscription that ends later.
            let renewal = StoreTransaction(transactionID: "life-e2", originalTransactionID: "life-e1", productID: "com.example.premium.monthly",
                                           purchaseDate: now.addingTimeInterval(-60).wholeMilliseconds,
                                           expiresDate: now.addingTimeInterval(59 * 86_400).wholeMilliseconds)
            purchase.inApp.append(renewal)
            purchase.latestReceiptInfo.append(renewal)
            #expect(try await service.post(purchase, for: "life-user").status == 200)
            purchase.cancel(transactionID: "life-e2", at: now.addingTimeInterval(-30))
            #expect(try await service.post(purchase, for: "life-user").status == 200)
            let events = try await Self.events(service, user: "life-user")
            #expect(events.map(\.type) == ["initial_purchase", "cancellation", "uncancellation", "renewal", "refund"])
            #expect(events.map(\.sequence) == Array(1...5))
            #expect(events[3].body["transaction_id"] as? String == "life-e2")
            #expect(events.allSatisfy { $0.body["original_transaction_id"] as? String == "life-e1" })
            #expect((events[1].entitlements["premium"] as? [String: Any])?["will_renew"] as? Bool == false)
        }
    }

    @Test func aTransferWritesAnEventForTheNewOwnerAndThePreviousOne() async throws {
        try await ServiceHarness.run { service in
            let purchase = receipt { $0.addPurchase("com.example.lifetime", transactionID: "move-e1", purchased: now) }
            #expect(try await service.post(purchase, for: "first-owner").status == 200)
            let moved = try await service.post(purchase, for: "second-owner")
            #expect(try moved.json()["transferred_from"] as? String == "first-owner")
            let newOwner = try await Self.events(service, user: "second-owner")
            #expect(newOwner.map(\.type) == ["transfer"])
            #expect(newOwner.first?.body["transferred_from"] as? String == "first-owner")
            #expect((newOwner.first?.entitlements["pro"] as? [String: Any])?["active"] as? Bool == true)
            let previous = try await Self.events(service, user: "first-owner")
            #expect(previous.map(\.type) == ["non_consumable_purchase", "transfer"])
            #expect(previous.last?.body["transferred_to"] as? String == "second-owner")
            #expect(previous.last?.entitlements.isEmpty == true, "the purchase left with its entitlement")
            // Both sides name the purchase that moved.
            for event in [newOwner.first, previous.last].compactMap({ $0 }) {
                #expect(event.body["product_id"] as? String == "com.example.lifetime")
                #expect(event.body["transaction_id"] as? String == "move-e1" && event.body["original_transaction_id"] as? String == "move-e1")
                #expect(event.body["environment"] as? String == "Production")
            }
        }
    }

    @Test func anEndWithoutAnyMessageIsAnExpirationWithinFiveSeconds() async throws {
        try await ServiceHarness.run { service in
            let ends = now.addingTimeInterval(2)
            let purchase = receipt {
                $0.addSubscription("com.example.premium.monthly", originalTransactionID: "exp-e1",
                                   start: ends.addingTimeInterval(-86_400), period: ISODuration(days: 1), willRenew: false)
            }
            #expect(try await service.post(purchase, for: "exp-user").status == 200)
            let expired = try await eventually(timeout: 10, everyMs: 50) {
                try await Self.events(service, user: "exp-user").contains { $0.type == "expiration" }
            }
            #expect(expired)
            let rows = try await service.sql("SELECT created_at FROM webhook_events WHERE user_id = 'exp-user' AND type = 'expiration'")
            let written = try #require(rows.first).date("created_at")
            let end = try #require(purchase.latestReceiptInfo.first?.expiresDate)
            #expect(written >= end.addingTimeInterval(-0.001) && written.timeIntervalSince(end) < 5, "written \(written.timeIntervalSince(end)) s after the end")
            let events = try await Self.events(service, user: "exp-user")
            #expect(events.map(\.type) == ["initial_purchase", "expiration"])
            let premium = try #require(events.last?.entitlements["premium"] as? [String: Any])
            #expect(premium["active"] as? Bool == false && premium["inactive_reason"] as? String == "expired")
            #expect(events.last?.body["original_transaction_id"] as? String == "exp-e1")
        }
    }

    /// Apple renews ahead of time: the renewal, bought at the old expiry, is recorded before it. Nothing shows
    /// until the old end passes; then the answer shows the new end, and the event is a `renewal` carrying the
    /// renewal's transaction, not an `expiration` of a subscription that stays active.
    @Test func aRenewalRecordedAheadIsARenewalWhenItsPeriodStarts() async throws {
        try await ServiceHarness.run { service in
            let ends = now.addingTimeInterval(2).wholeMilliseconds
            var purchase = receipt {
                $0.addSubscription("com.example.premium.monthly", originalTransactionID: "ahead-e1",
                                   start: ends.addingTimeInterval(-86_400), period: ISODuration(days: 1))
            }
            let renewal = StoreTransaction(transactionID: "ahead-e2", originalTransactionID: "ahead-e1", productID: "com.example.premium.monthly",
                                           purchaseDate: ends, expiresDate: ends.addingTimeInterval(86_400))
            purchase.inApp.append(renewal)
            purchase.latestReceiptInfo.append(renewal)
            #expect(try await service.post(purchase, for: "ahead-user").status == 200)
            let renewed = try await eventually(timeout: 10, everyMs: 50) { try await Self.events(service, user: "ahead-user").count == 2 }
            #expect(renewed)
            let events = try await Self.events(service, user: "ahead-user")
            #expect(events.map(\.type) == ["initial_purchase", "renewal"])
            #expect(events.first?.body["transaction_id"] as? String == "ahead-e1", "the purchase names the transaction in force")
            #expect(events.last?.body["transaction_id"] as? String == "ahead-e2")
            let premium = try #require(events.last?.entitlements["premium"] as? [String: Any])
            #expect(premium["active"] as? Bool == true && premium["expires_at"] as? String == RFC3339.string(from: ends.addingTimeInterval(86_400)))
        }
    }

    @Test func nothingIsWrittenWhenTheAnswerDoesNotChange() async throws {
        try await ServiceHarness.run { service in
            let lifetime = receipt { $0.addPurchase("com.example.lifetime", transactionID: "same-e1", purchased: now) }
            #expect(try await service.post(lifetime, for: "same-user").status == 200)
            // A dated grant of what a lifetime purchase gives is not shown: the answer stays the same.
            _ = try await grant(service, "same-user", "pro", extra: #", "duration": "P7D""#)
            #expect(try await Self.events(service, user: "same-user").map(\.type) == ["non_consumable_purchase"])
            #expect(try await service.sql("SELECT 1 FROM grants WHERE user_id = 'same-user'").count == 1)
        }
    }

    @Test func concurrentChangesOfOneUserGetConsecutiveSequences() async throws {
        try await ServiceHarness.run { service in
            let grants = (0..<20).map { index in Task { @Loop in try await grant(service, "busy-user", "e\(index)") } }
            for grant in grants { _ = try await grant.value }
            let events = try await Self.events(service, user: "busy-user")
            #expect(events.map(\.sequence) == Array(1...20))
            #expect(events.allSatisfy { $0.type == "grant" })
            // Each event's state includes every grant written before it.
            #expect(events.map(\.entitlements.count) == Array(1...20))
        }
    }

    @Test func theCustomerViewShowsSourcesTransactionsGrantsAndEventsNewestFirst() async throws {
        try await ServiceHarness.run { service in
            let purchase = receipt {
                $0.addSubscription("com.example.premium.monthly", originalTransactionID: "view-e1", start: now.addingTimeInterval(-60 * 86_400 - 60),
                                   period: ISODuration(days: 30), periods: 3)
                $0.addPurchase("com.example.coins.100", transactionID: "view-coin", purchased: now.addingTimeInterval(-5))
            }
            #expect(try await service.post(purchase, for: "view-user").status == 200)
            let grantID = try await grant(service, "view-user", "premium", extra: #", "duration": "P1D""#)
            _ = try await grant(service, "view-user", "vip")
            let answer = try await service.request("GET", "/v1/admin/users/view-user?events_limit=1&transactions_limit=2", key: ServiceHarness.adminKey)
            #expect(answer.status == 200, "\(answer.text)")
            let view = try answer.json()
            #expect(view["user_id"] as? String == "view-user")
            let premium = try #require(view.entitlement("premium"))
            #expect(premium["source"] as? String == "app_store" && premium["active"] as? Bool == true, "a month outlasts a day")
            let sources = try #require(premium["sources"] as? [[String: Any]])
            #expect(sources.count == 2, "the subscription (once, whatever its renewals) and the grant")
            #expect(sources.map { $0["wins"] as? Bool } == [true, false])
            #expect(sources[0]["source"] as? String == "app_store" && sources[0]["original_transaction_id"] as? String == "view-e1")
            #expect(sources[1]["source"] as? String == "grant" && sources[1]["grant_id"] as? String == grantID && sources[1]["active"] as? Bool == true)
            #expect((view["consumables"] as? [String: Any])?["coins"] as? Int == 100)
            #expect((view["grants"] as? [[String: Any]])?.count == 2)
            let transactions = try #require(view["transactions"] as? [[String: Any]])
            #expect(transactions.map { $0["transaction_id"] as? String } == ["view-coin", "view-e1002"], "newest first")
            let events = try #require(view["events"] as? [[String: Any]])
            #expect(events.count == 1)
            #expect(events.first?["type"] as? String == "grant" && events.first?["delivery"] as? String == "none",
                    "the grant of premium changed nothing shown, the grant of vip did")
            #expect(events.first?["sequence"] as? Int == 2)

            let nextEvents = try #require(view["next_events_cursor"] as? String)
            let nextTransactions = try #require(view["next_transactions_cursor"] as? String)
            let older = try await service.request("GET", "/v1/admin/users/view-user?events_cursor=\(nextEvents)&transactions_cursor=\(nextTransactions)",
                                                  key: ServiceHarness.adminKey).json()
            #expect((older["events"] as? [[String: Any]])?.map { $0["sequence"] as? Int } == [1])
            #expect((older["events"] as? [[String: Any]])?.first?["type"] as? String == "initial_purchase")
            #expect(older["next_events_cursor"] is NSNull)
            #expect((older["transactions"] as? [[String: Any]])?.map { $0["transaction_id"] as? String } == ["view-e1001", "view-e1"])
            #expect(older["next_transactions_cursor"] is NSNull)

            #expect(try await service.request("GET", "/v1/admin/users/view-user?events_cursor=nope", key: ServiceHarness.adminKey).status == 400)
            #expect(try await service.request("GET", "/v1/admin/users/view-user").status == 403)
            let empty = try await service.request("GET", "/v1/admin/users/nobody", key: ServiceHarness.adminKey).json()
            #expect((empty["events"] as? [Any])?.isEmpty == true && (empty["entitlements"] as? [String: Any])?.isEmpty == true)
        }
    }

    /// Transactions of one instant page by their ids' bytes, as PostgreSQL orders them: two ids Swift takes for one
    /// (canonically equivalent) are both listed, one per page.
    @Test func theCustomerViewPagesTransactionsByTheirIDsBytes() async throws {
        try await ServiceHarness.run { service in
            let instant = now.addingTimeInterval(-60)
            for ids in [["pg-y\u{E9}", "pg-a"], ["pg-ye\u{301}"]] {
                let purchase = receipt { receipt in
                    for id in ids { receipt.addPurchase("com.example.coins.100", transactionID: id, purchased: instant) }
                }
                #expect(try await service.post(purchase, for: "page-user").status == 200)
            }
            var seen: [String] = []
            var cursor: String?
            repeat {
                let query = "transactions_limit=1" + (cursor.map { "&transactions_cursor=\($0)" } ?? "")
                let page = try await service.request("GET", "/v1/admin/users/page-user?\(query)", key: ServiceHarness.adminKey).json()
                seen += (page["transactions"] as? [[String: Any]])?.compactMap { $0["transaction_id"] as? String } ?? []
                cursor = page["next_transactions_cursor"] as? String
            } while cursor != nil && seen.count < 10
            #expect(seen.map { Array($0.utf8) } == [Array("pg-y\u{E9}".utf8), Array("pg-ye\u{301}".utf8), Array("pg-a".utf8)])
        }
    }

    @Test func deliveriesAreListedNewestFirstAndRedeliveryNeedsAURL() async throws {
        try await ServiceHarness.run { service in
            for index in 0..<3 { _ = try await grant(service, "list-user", "e\(index)") }
            let page = try await service.request("GET", "/v1/admin/webhooks/deliveries?limit=2&user_id=list-user", key: ServiceHarness.adminKey).json()
            let deliveries = try #require(page["deliveries"] as? [[String: Any]])
            #expect(deliveries.count == 2)
            #expect(deliveries.allSatisfy { $0["status"] as? String == "none" && $0["attempts"] as? Int == 0 && $0["type"] as? String == "grant" })
            #expect(deliveries[0]["next_attempt_at"] is NSNull && deliveries[0]["last_response_status"] is NSNull)
            let cursor = try #require(page["next_cursor"] as? String)
            let rest = try await service.request("GET", "/v1/admin/webhooks/deliveries?limit=2&user_id=list-user&cursor=\(cursor)",
                                                 key: ServiceHarness.adminKey).json()
            #expect((rest["deliveries"] as? [Any])?.count == 1 && rest["next_cursor"] is NSNull)
            let ids = (deliveries + (rest["deliveries"] as? [[String: Any]] ?? [])).compactMap { $0["event_id"] as? String }
            let sequences = try await service.sql("SELECT event_id::text AS id FROM webhook_events WHERE user_id = 'list-user' ORDER BY sequence DESC")
            #expect(ids == (try sequences.map { try $0.string("id") }), "newest first")

            #expect(try await service.request("GET", "/v1/admin/webhooks/deliveries?status=pending", key: ServiceHarness.adminKey)
                .json()["deliveries"] as? [Any] != nil)
            #expect(try await service.request("GET", "/v1/admin/webhooks/deliveries?status=lost", key: ServiceHarness.adminKey).status == 400)
            #expect(try await service.request("POST", "/v1/admin/webhooks/events/\(ids[0])/redeliver", key: ServiceHarness.adminKey).status == 409)
            #expect(try await service.request("POST", "/v1/admin/webhooks/events/not-a-uuid/redeliver", key: ServiceHarness.adminKey).status == 404)
        }
    }
}
