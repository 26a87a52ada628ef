import EntitlementModel
import Foundation
import Testing
@testable import AppStore
@testable import EntitlementService
@testable import FakeAppStore
@testable import ServiceRuntime

/// Delivery end to end: the real service POSTs its events to a receiver written with the Standard Webhooks
/// reference library (`scripts/webhook-receiver/receiver.py`), which verifies every signature.
@Suite(.serialized, .timeLimit(.minutes(3)))
@Loop
struct WebhookDeliveryTests {
    let now = Date()

    /// Fast retries, so a refused attempt is tried again within a test's time.
    static let fastRetries = ["WEBHOOK_RETRY_BASE_MS": "50", "WEBHOOK_RETRY_MAX_MS": "400", "WEBHOOK_TIMEOUT_MS": "2000"]

    private func receipt(_ build: (inout FakeReceipt) -> Void) -> FakeReceipt {
        var receipt = FakeReceipt(bundleID: ServiceHarness.bundleID)
        build(&receipt)
        return receipt
    }

    private func admin(_ service: ServiceHarness, _ method: String, _ target: String, json: String? = nil) async throws -> RawHTTPClient.Response {
        try await service.request(method, target, json: json, key: ServiceHarness.adminKey)
    }

    /// Every event the service wrote, as (id, payload).
    private func written(_ service: ServiceHarness) async throws -> [String: String] {
        Dictionary(uniqueKeysWithValues: try await service.sql("SELECT event_id::text AS id, payload FROM webhook_events").map {
            (try $0.string("id"), try $0.string("payload"))
        })
    }

    /// Waits until the receiver has kept every event the service wrote (and the service has recorded each as
    /// delivered); the receiver's tally then.
    private func awaitDelivery(_ service: ServiceHarness, _ receiver: WebhookReceiver, timeout: Double = 30) async throws -> WebhookReceiver.Tally {
        var tally = try await receiver.tally()
        _ = try await eventually(timeout: timeout, everyMs: 50) {
            tally = try await receiver.tally()
            let undelivered = try await service.sql("SELECT 1 FROM webhook_events WHERE delivery_status <> 'delivered'")
            let ids = Set(try await written(service).keys)
            return undelivered.isEmpty && Set(tally.events.map(\.id)) == ids
        }
        return tally
    }

    @Test func everyKindOfChangeArrivesOnceSignedWithItsTypeSequenceAndState() async throws {
        let receiver = try await offLoop { try WebhookReceiver() }
        try await ServiceHarness.run(receiver.environment.merging(Self.fastRetries) { $1 }) { service in
            // Grants and their revocation.
            let grant = try await admin(service, "POST", "/v1/admin/users/hook-admin/grants", json: #"{"entitlement": "premium", "reason": "r"}"#)
            let grantID = try grant.json()["grant_id"] as? String ?? ""
            #expect(try await admin(service, "DELETE", "/v1/admin/grants/\(grantID)").status == 200)
            // Consumables bought through a receipt, then spent.
            let coins = receipt { $0.addPurchase("com.example.coins.100", transactionID: "hook-coin", purchased: now) }
            #expect(try await service.post(coins, for: "hook-coins").status == 200)
            #expect(try await service.request("POST", "/v1/users/hook-coins/consumables/coins/consume",
                                              json: #"{"amount": 40, "idempotency_key": "k"}"#).status == 200)
            // A subscription, a lifetime purchase and a pass through the fake App Store's verifyReceipt.
            let bought = receipt {
                $0.addSubscription("com.example.premium.monthly", originalTransactionID: "hook-sub", start: now.addingTimeInterval(-60), period: ISODuration(months: 1))
            }
            #expect(try await service.post(bought, for: "hook-buyer").status == 200)
            #expect(try await service.post(receipt { $0.addPurchase("com.example.lifetime", transactionID: "hook-life", purchased: now) }, for: "hook-buyer").status == 200)
            #expect(try await service.post(receipt { $0.addPurchase("com.example.pass.month", transactionID: "hook-pass", purchased: now) }, for: "hook-buyer").status == 200)
            // The lifetime purchase restored by another user moves to them.
            #expect(try await service.post(receipt { $0.addPurchase("com.example.lifetime", transactionID: "hook-life", purchased: now) }, for: "hook-restorer").status == 200)
            // The lifetime product then unlocks more: its owner (the restorer) hears of it once the worker has written it.
            #expect(try await admin(service, "PUT", "/v1/admin/products/com.example.lifetime",
                                    json: #"{"type": "non_consumable", "entitlements": ["pro", "extras"]}"#).status == 200)
            #expect(try await eventually(timeout: 10) {
                try await service.sql("SELECT 1 FROM user_event_heads WHERE pending_catalog_change IS NOT NULL").isEmpty
            })

            let tally = try await awaitDelivery(service, receiver)
            #expect(tally.invalid == 0, "every request verified with the standardwebhooks library")
            #expect(tally.refused == 0)
            let kept = tally.events
            #expect(kept.count == Set(kept.map(\.id)).count, "each event arrived once")
            let byUser = Dictionary(grouping: kept, by: \.userID).mapValues { $0.sorted { $0.sequence < $1.sequence } }
            #expect(byUser["hook-admin"]?.map(\.type) == ["grant", "grant_revoked"])
            #expect(byUser["hook-coins"]?.map(\.type) == ["consumable_purchase", "consumable_spent"])
            #expect(byUser["hook-buyer"]?.map(\.type) == ["initial_purchase", "non_consumable_purchase", "non_renewing_purchase", "transfer"])
            #expect(byUser["hook-restorer"]?.map(\.type) == ["transfer", "catalog_change"])
            #expect(byUser["hook-restorer"]?.last?.body["product_id"] as? String == "com.example.lifetime")
            for (user, events) in byUser {
                #expect(events.map(\.sequence) == Array(1...events.count), "\(user)")
            }
            #expect(byUser["hook-restorer"]?.first?.body["transferred_from"] as? String == "hook-buyer")
            #expect(byUser["hook-buyer"]?.last?.body["transferred_to"] as? String == "hook-restorer")
            // The body received is the body kept, byte for byte as JSON, and its state is what GET entitlements says.
            let payloads = try await written(service)
            for event in kept {
                let stored = try JSONSerialization.jsonObject(with: Data(try #require(payloads[event.id]).utf8)) as! NSDictionary
                #expect(stored.isEqual(to: event.body), "\(event.id)")
                #expect(event.body["id"] as? String == event.id, "webhook-id is the event id")
            }
            for user in ["hook-admin", "hook-coins", "hook-buyer", "hook-restorer"] {
                let now = try await service.entitlements(user)
                let last = try #require(byUser[user]?.last)
                #expect(NSDictionary(dictionary: now["entitlements"] as! [String: Any]).isEqual(to: last.body["entitlements"] as! [String: Any]), "\(user)")
                #expect(NSDictionary(dictionary: now["consumables"] as! [String: Any]).isEqual(to: last.body["consumables"] as! [String: Any]), "\(user)")
            }
            let statuses = try await service.sql("SELECT delivery_status, attempts, last_response_status FROM webhook_events")
            #expect(try statuses.allSatisfy { try $0.string("delivery_status") == "delivered" && $0.int("attempts") == 1 && $0.int("last_response_status") == 204 })
        }
    }

    @Test func aReceiverRefusingHalfTheRequestsStillGetsEveryEvent() async throws {
        let receiver = try await offLoop { try WebhookReceiver(failRate: 0.5, seed: 7) }
        try await ServiceHarness.run(receiver.environment.merging(Self.fastRetries) { $1 }) { service in
            for index in 0..<40 {
                let answer = try await admin(service, "POST", "/v1/admin/users/half-\(index % 8)/grants", json: #"{"entitlement": "e\#(index)", "reason": "r"}"#)
                #expect(answer.status == 201)
            }
            let tally = try await awaitDelivery(service, receiver)
            #expect(tally.events.count == 40 && Set(tally.events.map(\.id)).count == 40, "every event kept once")
            #expect(tally.refused > 5, "about half the attempts were refused (\(tally.refused))")
            #expect(tally.invalid == 0)
            let retried = try await service.sql("SELECT count(*)::int AS n FROM webhook_events WHERE attempts > 1").first?.int("n") ?? 0
            #expect(retried > 0)
            let page = try await admin(service, "GET", "/v1/admin/webhooks/deliveries?status=delivered&limit=500").json()
            #expect((page["deliveries"] as? [[String: Any]])?.count == 40)
            let sample = try #require((page["deliveries"] as? [[String: Any]])?.first)
            #expect(sample["last_attempt_at"] is String && sample["last_response_status"] as? Int == 204 && sample["next_attempt_at"] is NSNull)
        }
    }

    /// Any 2xx is delivered, whatever its body: one far over the 64 KiB the client keeps is cut, not a failure.
    @Test func aTwoHundredWithALargeBodyIsDelivered() async throws {
        let receiver = try await offLoop { try WebhookReceiver() }
        try await receiver.setReplyBytes(300_000)
        try await ServiceHarness.run(receiver.environment.merging(Self.fastRetries) { $1 }) { service in
            #expect(try await admin(service, "POST", "/v1/admin/users/verbose/grants", json: #"{"entitlement": "x", "reason": "r"}"#).status == 201)
            let tally = try await awaitDelivery(service, receiver)
            #expect(tally.events.count == 1)
            let row = try #require(try await service.sql("SELECT attempts, last_response_status FROM webhook_events").first)
            #expect(try row.int("attempts") == 1 && row.int("last_response_status") == 200)
        }
    }

    @Test func anExpiringSubscriptionsExpirationArrivesWithinFiveSecondsOfItsEnd() async throws {
        let receiver = try await offLoop { try WebhookReceiver() }
        try await ServiceHarness.run(receiver.environment.merging(Self.fastRetries) { $1 }) { service in
            let ends = now.addingTimeInterval(2)
            let purchase = receipt {
                $0.addSubscription("com.example.premium.monthly", originalTransactionID: "hook-exp", start: ends.addingTimeInterval(-86_400),
                                   period: ISODuration(days: 1), willRenew: false)
            }
            let end = try #require(purchase.latestReceiptInfo.first?.expiresDate)
            #expect(try await service.post(purchase, for: "hook-expiring").status == 200)
            var expiration: WebhookReceiver.Received?
            _ = try await eventually(timeout: 10, everyMs: 50) {
                expiration = try await receiver.tally().events.first { $0.type == "expiration" }
                return expiration != nil
            }
            let arrived = try #require(expiration)
            #expect(arrived.receivedAt - end.timeIntervalSince1970 < 5, "arrived \(arrived.receivedAt - end.timeIntervalSince1970) s after the end")
            #expect(arrived.receivedAt >= end.timeIntervalSince1970)
            #expect(arrived.sequence == 2 && arrived.userID == "hook-expiring")
            #expect((arrived.body["entitlements"] as? [String: Any]).flatMap { $0["premium"] as? [String: Any] }?["inactive_reason"] as? String == "expired")
        }
    }

    @Test func anEventFailsAfterItsWindowAndCanBeSentAgain() async throws {
        let receiver = try await offLoop { try WebhookReceiver(failRate: 1) }
        let environment = receiver.environment.merging(Self.fastRetries) { $1 }.merging(["WEBHOOK_RETRY_WINDOW_S": "1"]) { $1 }
        try await ServiceHarness.run(environment) { service in
            #expect(try await admin(service, "POST", "/v1/admin/users/doomed/grants", json: #"{"entitlement": "x", "reason": "r"}"#).status == 201)
            let failed = try await eventually(timeout: 10, everyMs: 50) {
                try await service.sql("SELECT 1 FROM webhook_events WHERE delivery_status = 'failed'").count == 1
            }
            #expect(failed)
            let row = try #require(try await admin(service, "GET", "/v1/admin/webhooks/deliveries?status=failed").json()["deliveries"] as? [[String: Any]]).first
            #expect((row?["attempts"] as? Int ?? 0) > 1 && row?["last_response_status"] as? Int == 500 && row?["next_attempt_at"] is NSNull)
            let id = try #require(row?["event_id"] as? String)
            #expect(try await receiver.tally().events.isEmpty)

            try await receiver.setFailRate(0)
            let again = try await admin(service, "POST", "/v1/admin/webhooks/events/\(id)/redeliver")
            #expect(again.status == 202)
            #expect(try again.json()["status"] as? String == "pending")
            let tally = try await awaitDelivery(service, receiver)
            #expect(tally.events.map(\.id) == [id])
            #expect(try await admin(service, "POST", "/v1/admin/webhooks/events/\(UUID().uuidString)/redeliver").status == 404)
            // Delivered events can be sent again too: the receiver dedupes by id.
            #expect(try await admin(service, "POST", "/v1/admin/webhooks/events/\(id)/redeliver").status == 202)
            _ = try await eventually(timeout: 10, everyMs: 50) { try await receiver.tally().events.count == 2 }
            #expect(try await receiver.tally().events.map(\.id) == [id, id])
        }
    }

    /// A redelivery starts a new round: its backoff counts from the round's first attempt again (else a long-failed
    /// event redelivered would wait the longest backoff, or fail after one attempt), while `attempts` keeps the total.
    @Test func aRedeliveryCountsItsBackoffFromTheRoundsFirstAttempt() async throws {
        try await PurchaseStack.run { stack in
            let store = WebhookDeliveryStore(), id = UUID()
            _ = try await stack.sql("""
                INSERT INTO webhook_events (event_id, user_id, sequence, type, payload, delivery_status, pending_since, next_attempt_at)
                VALUES ($1, 'rounds', 1, 'grant', '{}', 'pending', now(), now())
                """, [id])
            let due = "UPDATE webhook_events SET next_attempt_at = now() - interval '1 second', claim_id = NULL"
            var attempts: [Int] = []
            for _ in 0..<3 {
                attempts += try await store.claimDue(limit: 10, now: Date(), leaseMs: 60_000, on: stack.pool).map(\.attempt)
                _ = try await stack.sql(due)
            }
            _ = try await stack.sql("UPDATE webhook_events SET delivery_status = 'failed', next_attempt_at = NULL")
            #expect(try await store.redeliver(id, now: Date(), on: stack.pool))
            attempts += try await store.claimDue(limit: 10, now: Date().addingTimeInterval(1), leaseMs: 60_000, on: stack.pool).map(\.attempt)
            #expect(attempts == [1, 2, 3, 1])
            #expect(try await stack.sql("SELECT attempts FROM webhook_events").first?.int("attempts") == 4)
        }
    }

    @Test func aReceiverThatNeverAnswersTimesOutWithoutSlowingTheAPI() async throws {
        let silent = try Listener()  // accepts connections at the kernel, never answers
        let environment = ["WEBHOOK_URL": "http://127.0.0.1:\(silent.port)/hook", "WEBHOOK_SECRET": WebhookReceiver.makeSecret(),
                           "WEBHOOK_TIMEOUT_MS": "300", "WEBHOOK_RETRY_BASE_MS": "50", "WEBHOOK_RETRY_MAX_MS": "100", "WEBHOOK_CONCURRENCY": "4"]
        try await ServiceHarness.run(environment) { service in
            for index in 0..<12 {
                #expect(try await admin(service, "POST", "/v1/admin/users/stuck-\(index)/grants", json: #"{"entitlement": "x", "reason": "r"}"#).status == 201)
            }
            // While every slot waits on the silent receiver, the API answers at once.
            let started = RawHTTPClient.now()
            for _ in 0..<20 { #expect(try await service.request("GET", "/v1/users/stuck-0/entitlements").status == 200) }
            #expect(RawHTTPClient.now() - started < 2)
            let retried = try await eventually(timeout: 10, everyMs: 50) {
                try await service.sql("SELECT 1 FROM webhook_events WHERE attempts >= 2").count == 12
            }
            #expect(retried, "every event was tried again after its attempt timed out")
            let rows = try await service.sql("SELECT delivery_status, last_response_status, last_error FROM webhook_events")
            #expect(try rows.allSatisfy { try $0.string("delivery_status") == "pending" && $0.optionalInt("last_response_status") == nil })
            #expect(try rows.contains { try $0.optionalString("last_error")?.hasPrefix("timeout") == true })
            #expect(service.application.webhooks?.inFlightCount ?? 0 <= 4, "at most WEBHOOK_CONCURRENCY in flight")
        }
        silent.close()
    }
}
