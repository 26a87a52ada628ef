import EntitlementModel
import Foundation
import Testing
@testable import AppStore
@testable import EntitlementService
@testable import FakeAppStore
@testable import ServiceRuntime

/// The webhook events App Store notifications write, through the real service and PostgreSQL: one event of the
/// notification's kind for the purchase's owner when the worker applies it, the owner's events when a parked
/// notification is applied because its purchase got an owner, and one event however often a notification comes.
@Suite(.serialized, .timeLimit(.minutes(4)))
@Loop
struct NotificationEventTests {
    let now = Date()
    let monthly = "com.example.premium.monthly"

    /// `transaction` taken back by Apple (refund, or revocation when family-shared) `secondsAgo` ago.
    private func revoked(_ transaction: SignedStoreKit.Transaction, secondsAgo: Double) -> SignedStoreKit.Transaction {
        var revoked = transaction
        revoked.revoked = now.addingTimeInterval(-secondsAgo)
        revoked.signed = now.addingTimeInterval(-secondsAgo)
        return revoked
    }

    private func types(_ service: ServiceHarness, _ user: String) async throws -> [String] {
        try await WebhookEventTests.events(service, user: user).map(\.type)
    }

    /// Stores a notification the way the route does, due at once and left for the worker (as when the process that
    /// answered Apple died before applying it).
    private func leaveForTheWorker(_ service: ServiceHarness, _ type: String, uuid: String, transaction: SignedStoreKit.Transaction,
                                   renewal: [String: Any]? = nil, storeKit: SignedStoreKit, lease: Duration = .zero) async throws {
        let stored = StoredNotification(
            uuid: uuid, version: 2, type: type, subtype: nil, signedDate: transaction.signed, environment: "Production",
            originalTransactionID: transaction.originalID ?? transaction.id, transactionID: transaction.id,
            signedPayload: try storeKit.sign(transaction), transactionInfo: try JSONSerialization.data(withJSONObject: transaction.payload),
            renewalInfo: try renewal.map { try JSONSerialization.data(withJSONObject: $0) }, state: .received)
        let connection = try await PostgresConnection.connect(service.databaseURL)
        defer { connection.close() }
        #expect(try await NotificationStore().insert(stored, lease: lease, on: connection))
    }

    @Test func aRenewalARefundAndARevokeAppliedByTheWorkerWriteOneEventOfTheirTypeForTheOwner() async throws {
        try await ServiceHarness.runSigned { service, storeKit in
            let renewing = SignedStoreKit.Transaction.monthly("w-renew", purchased: now.addingTimeInterval(-86_400), signed: now.addingTimeInterval(-3_600))
            let refunding = SignedStoreKit.Transaction.monthly("w-refund", purchased: now.addingTimeInterval(-86_400), signed: now.addingTimeInterval(-3_600))
            let sharing = SignedStoreKit.Transaction.monthly("w-revoke", purchased: now.addingTimeInterval(-86_400), shared: true, signed: now.addingTimeInterval(-3_600))
            for (transaction, user) in [(renewing, "renew-owner"), (refunding, "refund-owner"), (sharing, "family-member")] {
                #expect(try await service.postSigned([try storeKit.sign(transaction)], for: user).status == 200)
                #expect(try await types(service, user) == ["initial_purchase"])
            }

            let renewal = SignedStoreKit.Transaction.monthly("w-renew-2", original: "w-renew", purchased: now.addingTimeInterval(-120), signed: now.addingTimeInterval(-60))
            try await leaveForTheWorker(service, "DID_RENEW", uuid: "worker-renew", transaction: renewal,
                                        renewal: SignedStoreKit.renewalPayload(originalID: "w-renew", productID: monthly, autoRenew: true,
                                                                               signed: now.addingTimeInterval(-60)), storeKit: storeKit)
            try await leaveForTheWorker(service, "REFUND", uuid: "worker-refund", transaction: revoked(refunding, secondsAgo: 60), storeKit: storeKit)
            try await leaveForTheWorker(service, "REVOKE", uuid: "worker-revoke", transaction: revoked(sharing, secondsAgo: 60), storeKit: storeKit)
            for uuid in ["worker-renew", "worker-refund", "worker-revoke"] {
                #expect(try await eventually(timeout: 15) { try await service.notificationState(uuid)?.state == "applied" }, "\(uuid)")
            }

            #expect(try await types(service, "renew-owner") == ["initial_purchase", "renewal"])
            #expect(try await types(service, "refund-owner") == ["initial_purchase", "refund"])
            #expect(try await types(service, "family-member") == ["initial_purchase", "revoke"])
            let total = try await service.sql("SELECT count(*)::int AS n FROM webhook_events")
            #expect(try total[0].int("n") == 6, "no event for anyone else")

            let renewed = try #require(try await WebhookEventTests.events(service, user: "renew-owner").last)
            #expect(renewed.body["transaction_id"] as? String == "w-renew-2" && renewed.body["original_transaction_id"] as? String == "w-renew")
            #expect((renewed.entitlements["premium"] as? [String: Any])?["will_renew"] as? Bool == true)
            let refund = try #require(try await WebhookEventTests.events(service, user: "refund-owner").last)
            #expect((refund.entitlements["premium"] as? [String: Any])?["inactive_reason"] as? String == "refunded")

            // Family Sharing ended: `revoked` in the event and in GET entitlements, never `refunded`.
            let revoke = try #require(try await WebhookEventTests.events(service, user: "family-member").last)
            #expect(revoke.body["product_id"] as? String == monthly && revoke.body["transaction_id"] as? String == "w-revoke")
            let shown = try #require(revoke.entitlements["premium"] as? [String: Any])
            #expect(shown["active"] as? Bool == false && shown["inactive_reason"] as? String == "revoked" && shown["ownership"] as? String == "family_shared")
            let answer = try #require(try await service.entitlements("family-member").entitlement("premium"))
            #expect(answer["inactive_reason"] as? String == "revoked")
            #expect(NSDictionary(dictionary: try await service.entitlements("family-member")["entitlements"] as! [String: Any]).isEqual(to: revoke.entitlements))
        }
    }

    @Test func parkedNotificationsYieldTheOwnersEventsWhenThePurchaseGetsAnOwner() async throws {
        try await ServiceHarness.runSigned { service, storeKit in
            // A refund, a revocation and a renewal, each of a purchase nobody has posted yet: parked, no event.
            let refunded = SignedStoreKit.Transaction.monthly("pk-refund", purchased: now.addingTimeInterval(-86_400), signed: now.addingTimeInterval(-3_000))
            let shared = SignedStoreKit.Transaction.monthly("pk-revoke", purchased: now.addingTimeInterval(-86_400), shared: true, signed: now.addingTimeInterval(-3_000))
            let lapsed = SignedStoreKit.Transaction.monthly("pk-renew", purchased: now.addingTimeInterval(-35 * 86_400), signed: now.addingTimeInterval(-3_000))
            let renewal = SignedStoreKit.Transaction.monthly("pk-renew-2", original: "pk-renew", purchased: now.addingTimeInterval(-5 * 86_400), signed: now.addingTimeInterval(-600))
            let parked: [(uuid: String, body: String)] = [
                ("pk-n-refund", try storeKit.notification("REFUND", uuid: "pk-n-refund", signed: now.addingTimeInterval(-600),
                                                          transaction: try storeKit.sign(revoked(refunded, secondsAgo: 600)))),
                ("pk-n-revoke", try storeKit.notification("REVOKE", uuid: "pk-n-revoke", signed: now.addingTimeInterval(-600),
                                                          transaction: try storeKit.sign(revoked(shared, secondsAgo: 600)))),
                ("pk-n-renew", try storeKit.notification("DID_RENEW", uuid: "pk-n-renew", signed: now.addingTimeInterval(-600),
                                                         transaction: try storeKit.sign(renewal),
                                                         renewal: try storeKit.renewal(originalID: "pk-renew", productID: monthly, autoRenew: true,
                                                                                       signed: now.addingTimeInterval(-600)))),
            ]
            for notification in parked {
                #expect(try await service.notify(notification.body).status == 200)
                #expect(try await service.notificationState(notification.uuid)?.state == "parked")
            }
            #expect(try await service.sql("SELECT 1 FROM webhook_events").isEmpty)

            // The owners appear: by signed transaction (each signed before its notification), and by receipt.
            #expect(try await service.postSigned([try storeKit.sign(refunded)], for: "pk-refund-owner").status == 200)
            #expect(try await service.postSigned([try storeKit.sign(shared)], for: "pk-family-member").status == 200)
            var receipt = FakeReceipt(bundleID: ServiceHarness.bundleID)
            receipt.addSubscription(monthly, originalTransactionID: "pk-renew", start: lapsed.purchased, period: try ISODuration(parsing: "P1M"))
            #expect(try await service.post(receipt, for: "pk-renew-owner").status == 200)
            for (uuid, owner) in [("pk-n-refund", "pk-refund-owner"), ("pk-n-revoke", "pk-family-member"), ("pk-n-renew", "pk-renew-owner")] {
                let stored = try #require(try await service.notificationState(uuid))
                #expect(stored.state == "applied" && stored.userID == owner)
            }

            // One event each, of what the owner now holds: a refunded purchase, a revoked one, a subscription
            // that is active through the parked renewal.
            let refund = try await WebhookEventTests.events(service, user: "pk-refund-owner")
            #expect(refund.map(\.type) == ["refund"])
            #expect(refund.first?.body["transaction_id"] as? String == "pk-refund")
            #expect((refund.first?.entitlements["premium"] as? [String: Any])?["inactive_reason"] as? String == "refunded")
            let revoke = try await WebhookEventTests.events(service, user: "pk-family-member")
            #expect(revoke.map(\.type) == ["revoke"])
            #expect((revoke.first?.entitlements["premium"] as? [String: Any])?["inactive_reason"] as? String == "revoked")
            let renewed = try await WebhookEventTests.events(service, user: "pk-renew-owner")
            #expect(renewed.map(\.type) == ["initial_purchase"])
            #expect(renewed.first?.body["transaction_id"] as? String == "pk-renew-2")
            let premium = try #require(renewed.first?.entitlements["premium"] as? [String: Any])
            #expect(premium["active"] as? Bool == true && premium["will_renew"] as? Bool == true)
            let total = try await service.sql("SELECT count(*)::int AS n FROM webhook_events")
            #expect(try total[0].int("n") == 3)
        }
    }

    /// A renewal that failed with no grace period (DID_FAIL_TO_RENEW, billing retry) is a `billing_issue`, also when
    /// the subscription's end had already passed and its `expiration` was written.
    @Test func aFailedRenewalIsABillingIssue() async throws {
        try await ServiceHarness.runSigned { service, storeKit in
            let lapsed = SignedStoreKit.Transaction.monthly("bi-1", purchased: now.addingTimeInterval(-30 * 86_400 - 60), signed: now.addingTimeInterval(-3_600))
            #expect(try await service.postSigned([try storeKit.sign(lapsed)], for: "bi-user").status == 200)
            #expect(try await types(service, "bi-user") == ["expiration"])
            let failed = try storeKit.notification("DID_FAIL_TO_RENEW", signed: now.addingTimeInterval(-30), transaction: try storeKit.sign(lapsed),
                                                   renewal: try storeKit.renewal(originalID: "bi-1", productID: monthly, autoRenew: true,
                                                                                 billingRetry: true, signed: now.addingTimeInterval(-30)))
            #expect(try await service.notify(failed).status == 200)
            #expect(try await types(service, "bi-user") == ["expiration", "billing_issue"])
            let issue = try #require(try await WebhookEventTests.events(service, user: "bi-user").last)
            #expect(issue.body["product_id"] as? String == monthly && issue.body["original_transaction_id"] as? String == "bi-1")
            let shown = try #require(issue.entitlements["premium"] as? [String: Any])
            #expect(shown["active"] as? Bool == false && shown["in_billing_retry"] as? Bool == true)
        }
    }

    /// Notifications stored by a process that died before applying them (their lease still runs, so the worker
    /// leaves them): a later notification of the same purchase applies the earlier one first, in signed order, and
    /// Apple's copy of one is applied at once.
    @Test func aNotificationADeadProcessStoredIsNeitherOvertakenNorLeftWaiting() async throws {
        try await ServiceHarness.runSigned { service, storeKit in
            func coins(_ id: String) -> SignedStoreKit.Transaction {
                SignedStoreKit.Transaction(id: id, productID: "com.example.coins.100", kind: .consumable,
                                           purchased: now.addingTimeInterval(-3_600), signed: now.addingTimeInterval(-3_600))
            }
            let (first, second) = (coins("dead-c1"), coins("dead-c2"))
            #expect(try await service.postSigned([try storeKit.sign(first), try storeKit.sign(second)], for: "dead-user").status == 200)
            let ledger = { (id: String) in try await service.sql("SELECT kind FROM consumable_ledger WHERE transaction_id = '\(id)' ORDER BY entry_id").map { try $0.string("kind") } }

            // The refund's reversal, signed after the refund the dead process left, comes: both apply, in order.
            try await leaveForTheWorker(service, "REFUND", uuid: "dead-refund-1", transaction: revoked(first, secondsAgo: 300), storeKit: storeKit,
                                        lease: .seconds(120))
            var reversed = first
            reversed.signed = now.addingTimeInterval(-200)
            #expect(try await service.notify(try storeKit.notification("REFUND_REVERSED", signed: now.addingTimeInterval(-200),
                                                                       transaction: try storeKit.sign(reversed))).status == 200)
            #expect(try await service.notificationState("dead-refund-1")?.state == "applied")
            #expect(try await ledger("dead-c1") == ["credit", "refund", "refund_reversal"])

            // Apple sends again the refund the dead process left: applied by this answer, not a minute later.
            try await leaveForTheWorker(service, "REFUND", uuid: "dead-refund-2", transaction: revoked(second, secondsAgo: 300), storeKit: storeKit,
                                        lease: .seconds(120))
            #expect(try await service.notify(try storeKit.notification("REFUND", uuid: "dead-refund-2", signed: now.addingTimeInterval(-300),
                                                                       transaction: try storeKit.sign(revoked(second, secondsAgo: 300)))).status == 200)
            #expect(try await service.notificationState("dead-refund-2")?.state == "applied")
            #expect(try await ledger("dead-c2") == ["credit", "refund"])
            #expect(try await (service.entitlements("dead-user")["consumables"] as? [String: Any])?["coins"] as? Int == 100)
        }
    }

    @Test func aNotificationDeliveredTwiceWritesOneEvent() async throws {
        try await ServiceHarness.runSigned { service, storeKit in
            let bought = SignedStoreKit.Transaction.monthly("twice-1", purchased: now.addingTimeInterval(-86_400), signed: now.addingTimeInterval(-3_600))
            #expect(try await service.postSigned([try storeKit.sign(bought)], for: "twice-user").status == 200)
            let coins = SignedStoreKit.Transaction(id: "twice-c", productID: "com.example.coins.100", kind: .consumable,
                                                   purchased: now.addingTimeInterval(-3_600), signed: now.addingTimeInterval(-3_600))
            #expect(try await service.postSigned([try storeKit.sign(coins)], for: "twice-user").status == 200)
            #expect(try await types(service, "twice-user") == ["initial_purchase", "consumable_purchase"])

            /// Delivers `body` twice at once, then a third time.
            func deliverThrice(_ body: String) async throws {
                let both = [Task { try await service.notify(body) }, Task { try await service.notify(body) }]
                for delivery in both { #expect(try await delivery.value.status == 200) }
                #expect(try await service.notify(body).status == 200)
            }
            let refund = try storeKit.notification("REFUND", signed: now.addingTimeInterval(-600),
                                                   transaction: try storeKit.sign(revoked(bought, secondsAgo: 600)))
            try await deliverThrice(refund)
            #expect(try await types(service, "twice-user") == ["initial_purchase", "consumable_purchase", "refund"])
            // The same statement under another notificationUUID (Apple's retry): the answer does not change, no event.
            #expect(try await service.notify(try storeKit.notification("REFUND", signed: now.addingTimeInterval(-600),
                                                                       transaction: try storeKit.sign(revoked(bought, secondsAgo: 600)))).status == 200)
            #expect(try await types(service, "twice-user").count == 3)

            // A consumable refunded, reversed and refunded again, each notification delivered three times: one
            // event per change, the balance following.
            let balance = { try await (service.entitlements("twice-user")["consumables"] as? [String: Any])?["coins"] as? Int }
            var reversedCoins = coins
            reversedCoins.signed = now.addingTimeInterval(-200)
            for (notification, expected) in [
                (try storeKit.notification("REFUND", signed: now.addingTimeInterval(-300), transaction: try storeKit.sign(revoked(coins, secondsAgo: 300))), 0),
                (try storeKit.notification("REFUND_REVERSED", signed: now.addingTimeInterval(-200), transaction: try storeKit.sign(reversedCoins)), 100),
                (try storeKit.notification("REFUND", signed: now.addingTimeInterval(-100), transaction: try storeKit.sign(revoked(coins, secondsAgo: 100))), 0),
            ] {
                try await deliverThrice(notification)
                #expect(try await balance() == expected)
            }
            let events = try await WebhookEventTests.events(service, user: "twice-user")
            #expect(events.map(\.type) == ["initial_purchase", "consumable_purchase", "refund", "refund", "refund_reversed", "refund"])
            #expect(events.suffix(3).allSatisfy { $0.body["transaction_id"] as? String == "twice-c" })
            #expect(events.map(\.sequence) == Array(1...6))
            let notifications = try await service.sql("SELECT count(*)::int AS n FROM app_store_notifications")
            #expect(try notifications[0].int("n") == 5)
        }
    }
}
