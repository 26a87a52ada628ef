import EntitlementModel
import Foundation
import Testing
@testable import AppStore
@testable import EntitlementService
@testable import FakeAppStore
@testable import ServiceRuntime

/// Signed V2 notifications through the real service and PostgreSQL: durable, once, in order, parked until
/// their purchase has an owner.
@Suite(.serialized, .timeLimit(.minutes(4)))
@Loop
struct NotificationV2Tests {
    let now = Date()
    let monthly = "com.example.premium.monthly"

    private func run(_ body: (ServiceHarness, SignedStoreKit) async throws -> Void) async throws {
        try await ServiceHarness.runSigned(body)
    }

    private func subscription(_ id: String, original: String? = nil, purchased: Date, days: Double = 30, revoked: Date? = nil,
                              token: String? = nil, signed: Date) -> SignedStoreKit.Transaction {
        .monthly(id, original: original, purchased: purchased, days: days, revoked: revoked, token: token, signed: signed)
    }

    @Test func aRenewalARefundAndItsReversal() async throws {
        try await run { service, storeKit in
            let first = subscription("life-1", purchased: now.addingTimeInterval(-31 * 86_400), signed: now.addingTimeInterval(-3_600))
            #expect(try await service.postSigned([try storeKit.sign(first)], for: "lifecycle").status == 200)
            #expect(try await service.entitlements("lifecycle").entitlement("premium")?["active"] as? Bool == false)

            // A renewal: a new transaction of the same purchase, with the renewal state.
            let renewed = subscription("life-2", original: "life-1", purchased: now.addingTimeInterval(-86_400), signed: now.addingTimeInterval(-60))
            let renewal = try storeKit.notification("DID_RENEW", signed: now.addingTimeInterval(-60), transaction: try storeKit.sign(renewed),
                                                    renewal: try storeKit.renewal(originalID: "life-1", productID: monthly, autoRenew: true,
                                                                                  signed: now.addingTimeInterval(-60)))
            #expect(try await service.notify(renewal).status == 200)
            var premium = try #require(try await service.entitlements("lifecycle").entitlement("premium"))
            #expect(premium["active"] as? Bool == true)
            #expect(premium["will_renew"] as? Bool == true)
            let expiresAt = try #require(RFC3339.date(from: premium["expires_at"] as? String ?? ""))
            #expect(abs(expiresAt.timeIntervalSince(renewed.expires!)) < 1)

            // A refund of the renewal ends access at once.
            var refunded = renewed
            refunded.revoked = now.addingTimeInterval(-30)
            refunded.signed = now.addingTimeInterval(-30)
            #expect(try await service.notify(try storeKit.notification("REFUND", signed: refunded.signed,
                                                                       transaction: try storeKit.sign(refunded))).status == 200)
            premium = try #require(try await service.entitlements("lifecycle").entitlement("premium"))
            #expect(premium["active"] as? Bool == false)
            #expect(premium["inactive_reason"] as? String == "refunded")

            // Reversed: the transaction is un-refunded.
            var reversed = renewed
            reversed.signed = now.addingTimeInterval(-20)
            #expect(try await service.notify(try storeKit.notification("REFUND_REVERSED", signed: reversed.signed,
                                                                       transaction: try storeKit.sign(reversed))).status == 200)
            premium = try #require(try await service.entitlements("lifecycle").entitlement("premium"))
            #expect(premium["active"] as? Bool == true, "\(premium)")
            let row = try await service.sql("SELECT cancellation_date FROM app_store_transactions WHERE transaction_id = 'life-2'")
            #expect(try row[0].optionalDate("cancellation_date") == nil)

            // The refund again, as Apple retries it under a new id but with its old signing date: older than the
            // reversal, it changes nothing.
            #expect(try await service.notify(try storeKit.notification("REFUND", signed: refunded.signed,
                                                                       transaction: try storeKit.sign(refunded))).status == 200)
            #expect(try await service.entitlements("lifecycle").entitlement("premium")?["active"] as? Bool == true)
        }
    }

    @Test func billingTroubleThenExpiry() async throws {
        try await run { service, storeKit in
            let lapsed = subscription("exp-1", purchased: now.addingTimeInterval(-30 * 86_400 - 60), signed: now.addingTimeInterval(-3_600))
            #expect(try await service.postSigned([try storeKit.sign(lapsed)], for: "expiring").status == 200)
            #expect(try await service.entitlements("expiring").entitlement("premium")?["active"] as? Bool == false)

            let grace = try storeKit.notification("DID_FAIL_TO_RENEW", subtype: "GRACE_PERIOD", signed: now.addingTimeInterval(-50),
                                                  transaction: try storeKit.sign(lapsed),
                                                  renewal: try storeKit.renewal(originalID: "exp-1", productID: monthly, autoRenew: true, billingRetry: true,
                                                                                gracePeriodExpires: now.addingTimeInterval(86_400),
                                                                                signed: now.addingTimeInterval(-50)))
            #expect(try await service.notify(grace).status == 200)
            var premium = try #require(try await service.entitlements("expiring").entitlement("premium"))
            #expect(premium["active"] as? Bool == true)
            #expect(premium["in_grace_period"] as? Bool == true)
            #expect(premium["in_billing_retry"] as? Bool == true)

            let expired = try storeKit.notification("EXPIRED", subtype: "BILLING_RETRY", signed: now.addingTimeInterval(-10),
                                                    transaction: try storeKit.sign(lapsed),
                                                    renewal: try storeKit.renewal(originalID: "exp-1", productID: monthly, autoRenew: false,
                                                                                  expirationIntent: 2, signed: now.addingTimeInterval(-10)))
            #expect(try await service.notify(expired).status == 200)
            premium = try #require(try await service.entitlements("expiring").entitlement("premium"))
            #expect(premium["active"] as? Bool == false)
            #expect(premium["inactive_reason"] as? String == "billing_retry_ended")
            #expect(premium["will_renew"] as? Bool == false)

            // The grace notification once more, late and under a new id: older renewal state never overwrites newer.
            let late = try storeKit.notification("DID_FAIL_TO_RENEW", subtype: "GRACE_PERIOD", signed: now.addingTimeInterval(-50),
                                                 transaction: try storeKit.sign(lapsed),
                                                 renewal: try storeKit.renewal(originalID: "exp-1", productID: monthly, autoRenew: true, billingRetry: true,
                                                                               gracePeriodExpires: now.addingTimeInterval(86_400),
                                                                               signed: now.addingTimeInterval(-50)))
            #expect(try await service.notify(late).status == 200)
            #expect(try await service.entitlements("expiring").entitlement("premium")?["active"] as? Bool == false)
        }
    }

    @Test func aConsumablesRefundIsDebitedOnceAndCreditedBackOnceWhenReversed() async throws {
        try await run { service, storeKit in
            let coins = SignedStoreKit.Transaction(id: "c-1", productID: "com.example.coins.100", kind: .consumable,
                                                   purchased: now.addingTimeInterval(-600), signed: now.addingTimeInterval(-600))
            #expect(try await service.postSigned([try storeKit.sign(coins)], for: "coin-user").status == 200)
            var refunded = coins
            refunded.revoked = now.addingTimeInterval(-300)
            refunded.signed = now.addingTimeInterval(-300)
            let refund = try storeKit.notification("REFUND", signed: refunded.signed, transaction: try storeKit.sign(refunded))
            var reversed = coins
            reversed.signed = now.addingTimeInterval(-100)
            let reversal = try storeKit.notification("REFUND_REVERSED", signed: reversed.signed, transaction: try storeKit.sign(reversed))
            let balance = { try await (service.entitlements("coin-user")["consumables"] as? [String: Any])?["coins"] as? Int }
            #expect(try await service.notify(refund).status == 200)
            #expect(try await balance() == 0)
            #expect(try await service.notify(reversal).status == 200)
            #expect(try await balance() == 100)
            // Posting the old statements again changes nothing: each was signed before the newest one.
            #expect(try await service.postSigned([try storeKit.sign(refunded)], for: "coin-user").status == 200)
            #expect(try await service.postSigned([try storeKit.sign(coins)], for: "coin-user").status == 200)
            #expect(try await balance() == 100)
            let kinds = try await service.sql("SELECT kind FROM consumable_ledger WHERE transaction_id = 'c-1' ORDER BY entry_id").map { try $0.string("kind") }
            #expect(kinds == ["credit", "refund", "refund_reversal"])
        }
    }

    @Test func aSubscribedNotificationCarryingAUsersTokenEntitlesThemBeforeTheAppPostsAnything() async throws {
        try await run { service, storeKit in
            let token = try #require(try await service.request("GET", "/v1/users/early-user/app-account-token").json()["app_account_token"] as? String)
            let uuid = UUID().uuidString.lowercased()
            let bought = subscription("early-1", purchased: now.addingTimeInterval(-60), token: token, signed: now.addingTimeInterval(-60))
            let subscribed = try storeKit.notification("SUBSCRIBED", subtype: "INITIAL_BUY", uuid: uuid, signed: now.addingTimeInterval(-60),
                                                       transaction: try storeKit.sign(bought),
                                                       renewal: try storeKit.renewal(originalID: "early-1", productID: monthly, autoRenew: true,
                                                                                     signed: now.addingTimeInterval(-60)))
            #expect(try await service.notify(subscribed).status == 200)
            let premium = try #require(try await service.entitlements("early-user").entitlement("premium"))
            #expect(premium["active"] as? Bool == true)
            #expect(premium["will_renew"] as? Bool == true)
            let stored = try #require(try await service.notificationState(uuid))
            #expect(stored.state == "applied" && stored.userID == "early-user")
        }
    }

    /// Another app account resubscribing on the same Apple ID: the notification's transaction carries that
    /// account's token, so the purchase moves to its user at once (as a post of it would), audited as a transfer.
    @Test func aNotificationCarryingAnotherUsersTokenMovesThePurchaseToThem() async throws {
        try await run { service, storeKit in
            let lapsed = subscription("moved-1", purchased: now.addingTimeInterval(-40 * 86_400), signed: now.addingTimeInterval(-40 * 86_400))
            #expect(try await service.postSigned([try storeKit.sign(lapsed)], for: "first-account").status == 200)
            let token = try #require(try await service.request("GET", "/v1/users/second-account/app-account-token").json()["app_account_token"] as? String)
            let resubscribed = subscription("moved-2", original: "moved-1", purchased: now.addingTimeInterval(-60), token: token,
                                            signed: now.addingTimeInterval(-60))
            let uuid = UUID().uuidString.lowercased()
            #expect(try await service.notify(try storeKit.notification(
                "SUBSCRIBED", subtype: "RESUBSCRIBE", uuid: uuid, signed: now.addingTimeInterval(-60), transaction: try storeKit.sign(resubscribed),
                renewal: try storeKit.renewal(originalID: "moved-1", productID: monthly, autoRenew: true, signed: now.addingTimeInterval(-60))
            )).status == 200)
            #expect(try await service.entitlements("second-account").entitlement("premium")?["active"] as? Bool == true)
            #expect(try await service.entitlements("first-account").entitlement("premium")?["active"] as? Bool != true)
            let stored = try #require(try await service.notificationState(uuid))
            #expect(stored.state == "applied" && stored.userID == "second-account")
            let audit = try await service.sql("SELECT actor, user_id FROM audit_events WHERE subject = 'moved-1' AND action = 'ownership.transfer'")
            #expect(try audit.map { [try $0.string("actor"), try $0.string("user_id")] } == [["app-store-notification", "second-account"]])
            // The same account's token again changes nothing.
            #expect(try await service.notify(try storeKit.notification(
                "DID_RENEW", signed: now.addingTimeInterval(-30), transaction: try storeKit.sign(resubscribed))).status == 200)
            #expect(try await service.sql("SELECT 1 FROM audit_events WHERE subject = 'moved-1'").count == 1)
        }
    }

    @Test func aParkedNotificationIsAppliedWhenTheOwnerAppears() async throws {
        try await run { service, storeKit in
            let bought = subscription("park-1", purchased: now.addingTimeInterval(-86_400), signed: now.addingTimeInterval(-3_000))
            var refunded = bought
            refunded.revoked = now.addingTimeInterval(-600)
            refunded.signed = now.addingTimeInterval(-600)
            let uuid = UUID().uuidString.lowercased()
            #expect(try await service.notify(try storeKit.notification("REFUND", uuid: uuid, signed: refunded.signed,
                                                                       transaction: try storeKit.sign(refunded))).status == 200)
            #expect(try await service.notificationState(uuid)?.state == "parked")
            #expect(try await service.notificationState(uuid)?.userID == nil)

            // The app posts the purchase (signed before the refund): the parked refund applies in the same
            // recording, so the answer already shows it.
            let answer = try await service.postSigned([try storeKit.sign(bought)], for: "late-owner")
            #expect(answer.status == 200, "\(answer.text)")
            #expect(try answer.json().entitlement("premium")?["inactive_reason"] as? String == "refunded")
            let stored = try #require(try await service.notificationState(uuid))
            #expect(stored.state == "applied" && stored.userID == "late-owner")

            // A receipt is an owner appearing too.
            let other = subscription("park-2", purchased: now.addingTimeInterval(-86_400), signed: now.addingTimeInterval(-3_000))
            let renewalUUID = UUID().uuidString.lowercased()
            #expect(try await service.notify(try storeKit.notification(
                "DID_CHANGE_RENEWAL_STATUS", subtype: "AUTO_RENEW_DISABLED", uuid: renewalUUID, signed: now.addingTimeInterval(-100),
                transaction: try storeKit.sign(other),
                renewal: try storeKit.renewal(originalID: "park-2", productID: monthly, autoRenew: false, signed: now.addingTimeInterval(-100))
            )).status == 200)
            #expect(try await service.notificationState(renewalUUID)?.state == "parked")
            var receipt = FakeReceipt(bundleID: ServiceHarness.bundleID)
            receipt.addSubscription(monthly, originalTransactionID: "park-2", start: now.addingTimeInterval(-86_400), period: try ISODuration(parsing: "P1M"))
            #expect(try await service.post(receipt, for: "receipt-owner").status == 200)
            #expect(try await service.notificationState(renewalUUID)?.userID == "receipt-owner")
        }
    }

    @Test func theSameNotificationAgainChangesNothingAndTestsAreIgnored() async throws {
        try await run { service, storeKit in
            let bought = subscription("dup-1", purchased: now.addingTimeInterval(-600), signed: now.addingTimeInterval(-600))
            #expect(try await service.postSigned([try storeKit.sign(bought)], for: "dup-user").status == 200)
            let uuid = UUID().uuidString.lowercased()
            let renewal = { (autoRenew: Bool) in
                try storeKit.notification("DID_CHANGE_RENEWAL_STATUS", subtype: autoRenew ? "AUTO_RENEW_ENABLED" : "AUTO_RENEW_DISABLED", uuid: uuid,
                                          signed: now.addingTimeInterval(autoRenew ? -10 : -20), transaction: try storeKit.sign(bought),
                                          renewal: try storeKit.renewal(originalID: "dup-1", productID: monthly, autoRenew: autoRenew,
                                                                        signed: now.addingTimeInterval(autoRenew ? -10 : -20)))
            }
            #expect(try await service.notify(try renewal(false)).status == 200)
            #expect(try await service.entitlements("dup-user").entitlement("premium")?["will_renew"] as? Bool == false)
            // Another payload under the same notificationUUID: 200, and nothing changes.
            #expect(try await service.notify(try renewal(true)).status == 200)
            #expect(try await service.entitlements("dup-user").entitlement("premium")?["will_renew"] as? Bool == false)

            let testUUID = UUID().uuidString.lowercased()
            #expect(try await service.notify(try storeKit.notification("TEST", uuid: testUUID, signed: now, transaction: nil)).status == 200)
            #expect(try await service.notificationState(testUUID)?.state == "ignored")
            let count = try await service.sql("SELECT count(*)::int AS n FROM app_store_notifications")
            #expect(try count[0].int("n") == 2)

            // Refused ones are not stored.
            let forged = try SignedStoreKit()
            defer { forged.removeRoot() }
            let refused = try await service.notify(try forged.notification("TEST", signed: now, transaction: nil))
            #expect(refused.status == 401)
            #expect(try refused.json()["field"] as? String == "signedPayload")
        }
    }

    @Test func aVersion1NotificationIsStoredOnceByItsBodyAndWithoutItsPassword() async throws {
        try await ServiceHarness.run { service in
            var receipt = FakeReceipt(bundleID: ServiceHarness.bundleID)
            receipt.addSubscription(monthly, originalTransactionID: "v1-1", start: now.addingTimeInterval(-86_400), period: try ISODuration(parsing: "P1M"))
            #expect(try await service.post(receipt, for: "v1-user").status == 200)
            receipt.cancel(transactionID: "v1-1", at: now.addingTimeInterval(-5))
            guard case .object(var unified) = receipt.verifyReceiptBody(receiptData: receipt.receiptData, requestDate: now, excludeOldTransactions: false) else {
                Issue.record("the fake's answer is not an object")
                return
            }
            unified.removeValue(forKey: "receipt")
            let body = (["notification_type": "REFUND", "password": .string(ServiceHarness.sharedSecret), "environment": "PROD",
                         "unified_receipt": .object(unified)] as JSONValue).jsonText
            #expect(try await service.notify(body).status == 200)
            #expect(try await service.notify(body).status == 200)
            let rows = try await service.sql("SELECT notification_uuid, version, state, user_id, signed_payload FROM app_store_notifications")
            #expect(rows.count == 1)
            let row = try #require(rows.first)
            #expect(try row.string("notification_uuid").hasPrefix("v1:") && row.int("version") == 1)
            #expect(try row.string("state") == "applied" && row.optionalString("user_id") == "v1-user")
            #expect(try !row.string("signed_payload").contains(ServiceHarness.sharedSecret))
            #expect(try await service.entitlements("v1-user").entitlement("premium")?["inactive_reason"] as? String == "refunded")
        }
    }

    @Test func theWorkerAppliesWhatTheRequestThatStoredItCouldNot() async throws {
        try await run { service, storeKit in
            let bought = subscription("worker-1", purchased: now.addingTimeInterval(-86_400), signed: now.addingTimeInterval(-600))
            #expect(try await service.postSigned([try storeKit.sign(bought)], for: "worker-user").status == 200)
            // Stored and answered, then the process died before applying it: only the row is left, due now.
            var refunded = bought
            refunded.revoked = now.addingTimeInterval(-60)
            refunded.signed = now.addingTimeInterval(-60)
            let stored = StoredNotification(
                uuid: "left-behind", version: 2, type: "REFUND", subtype: nil, signedDate: refunded.signed, environment: "Production",
                originalTransactionID: "worker-1", transactionID: "worker-1", signedPayload: try storeKit.sign(refunded),
                transactionInfo: try JSONSerialization.data(withJSONObject: refunded.payload), renewalInfo: nil, state: .received)
            let connection = try await PostgresConnection.connect(service.databaseURL)
            defer { connection.close() }
            #expect(try await NotificationStore().insert(stored, lease: .zero, on: connection))
            #expect(try await eventually(timeout: 10) { try await service.notificationState("left-behind")?.state == "applied" })
            #expect(try await service.entitlements("worker-user").entitlement("premium")?["inactive_reason"] as? String == "refunded")
            let attempts = try await service.sql("SELECT attempts FROM app_store_notifications WHERE notification_uuid = 'left-behind'")
            #expect(try attempts[0].int("attempts") == 1)
        }
    }

    /// A subscription's life in 100 notifications: renewals, auto-renew turned off and on, billing trouble.
    private func lifeOf(_ purchase: String, storeKit: SignedStoreKit) throws -> [(uuid: String, body: String)] {
        let start = now.addingTimeInterval(-40 * 86_400)
        let first = now.addingTimeInterval(-20_000)
        return try (0..<100).map { step in
            let signed = first.addingTimeInterval(Double(step) * 100)
            let period = step / 4
            let transaction = subscription("\(purchase)-\(period)", original: "\(purchase)-0", purchased: start.addingTimeInterval(Double(period) * 86_400),
                                           days: 1, signed: signed)
            let (type, subtype, autoRenew, billingRetry): (String, String?, Bool, Bool) = switch step % 4 {
            case 0: (period == 0 ? "SUBSCRIBED" : "DID_RENEW", nil, true, false)
            case 1: ("DID_CHANGE_RENEWAL_STATUS", "AUTO_RENEW_DISABLED", false, false)
            case 2: ("DID_CHANGE_RENEWAL_STATUS", "AUTO_RENEW_ENABLED", true, false)
            default: ("DID_FAIL_TO_RENEW", step == 99 ? "GRACE_PERIOD" : nil, true, true)
            }
            let renewal = try storeKit.renewal(originalID: "\(purchase)-0", productID: monthly, autoRenew: autoRenew, billingRetry: billingRetry,
                                               gracePeriodExpires: step == 99 ? now.addingTimeInterval(86_400) : nil, signed: signed)
            let uuid = "\(purchase)-n\(step)"
            return (uuid, try storeKit.notification(type, subtype: subtype, uuid: uuid, signed: signed,
                                                   transaction: try storeKit.sign(transaction), renewal: renewal))
        }
    }

    @Test func notificationsSentTwiceInAnyOrderLeaveTheStateOfTheirOrder() async throws {
        try await run { service, storeKit in
            for (purchase, user) in [("ordered", "ordered-user"), ("shuffled", "shuffled-user")] {
                let token = try await service.request("GET", "/v1/users/\(user)/app-account-token").json()["app_account_token"] as? String
                let bought = subscription("\(purchase)-0", purchased: now.addingTimeInterval(-40 * 86_400), days: 1, token: token,
                                          signed: now.addingTimeInterval(-30_000))
                #expect(try await service.postSigned([try storeKit.sign(bought)], for: user).status == 200)
            }
            for notification in try lifeOf("ordered", storeKit: storeKit) {
                #expect(try await service.notify(notification.body).status == 200)
            }
            var copies = try lifeOf("shuffled", storeKit: storeKit)
            copies += copies
            copies.shuffle()
            let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
                for lane in 0..<8 {
                    let mine = copies.enumerated().filter { $0.offset % 8 == lane }.map(\.element.body)
                    group.addTask {
                        var statuses: [Int] = []
                        for body in mine { statuses.append(try await service.notify(body).status) }
                        return statuses.allSatisfy { $0 == 200 } ? 200 : statuses.first { $0 != 200 } ?? 0
                    }
                }
                var all: [Int] = []
                for try await status in group { all.append(status) }
                return all
            }
            #expect(statuses.allSatisfy { $0 == 200 }, "\(statuses)")

            let state = { (purchase: String) async throws -> String in
                let subscription = try await service.sql("""
                    SELECT product_id, will_renew, in_billing_retry, grace_period_expires_date, latest_expires_date, renewal_signed_date,
                           (SELECT count(*) FROM app_store_transactions t WHERE t.original_transaction_id = s.original_transaction_id)::int AS transactions,
                           (SELECT count(*) FROM app_store_notifications n WHERE n.original_transaction_id = s.original_transaction_id AND state = 'applied')::int AS applied
                      FROM subscriptions s WHERE original_transaction_id = $1
                    """, [purchase + "-0"])
                let row = try #require(subscription.first)
                return try [row.string("product_id"), String(row.bool("will_renew")), String(row.bool("in_billing_retry")),
                            row.optionalDate("grace_period_expires_date").map { RFC3339.string(from: $0) } ?? "-",
                            RFC3339.string(from: row.date("latest_expires_date")), RFC3339.string(from: row.date("renewal_signed_date")),
                            String(row.int("transactions")), String(row.int("applied"))].joined(separator: " ")
            }
            let ordered = try await state("ordered"), shuffled = try await state("shuffled")
            #expect(ordered == shuffled)
            #expect(ordered.hasPrefix("\(monthly) true true "), "\(ordered)")
            #expect(ordered.hasSuffix(" 25 100"), "\(ordered)")
            var orderedDocument = try await service.entitlements("ordered-user"), shuffledDocument = try await service.entitlements("shuffled-user")
            for key in ["user_id", "as_of"] {
                orderedDocument[key] = nil
                shuffledDocument[key] = nil
            }
            let text = { (document: [String: Any]) in
                String(decoding: try JSONSerialization.data(withJSONObject: document, options: .sortedKeys), as: UTF8.self)
                    .replacingOccurrences(of: "ordered", with: "X").replacingOccurrences(of: "shuffled", with: "X")
            }
            #expect(try text(orderedDocument) == text(shuffledDocument))
            #expect(orderedDocument.entitlement("premium")?["in_grace_period"] as? Bool == true, "\(orderedDocument)")
        }
    }

    @Test func adminsListNotificationsNewestFirstAPageAtATime() async throws {
        try await run { service, storeKit in
            for index in 0..<5 {
                let type = index.isMultiple(of: 2) ? "TEST" : "REFUND_DECLINED"
                let transaction = try storeKit.sign(subscription("list-\(index)", purchased: now.addingTimeInterval(-600), signed: now.addingTimeInterval(-600)))
                #expect(try await service.notify(try storeKit.notification(type, uuid: "list-\(index)", signed: now.addingTimeInterval(Double(index - 10)),
                                                                           transaction: type == "TEST" ? nil : transaction)).status == 200)
            }
            let admin = { (query: String) in try await service.request("GET", "/v1/admin/notifications\(query)", key: ServiceHarness.adminKey) }
            let first = try await admin("?limit=2")
            #expect(first.status == 200, "\(first.text)")
            let page = try first.json()
            let notifications = try #require(page["notifications"] as? [[String: Any]])
            #expect(notifications.compactMap { $0["notification_uuid"] as? String } == ["list-4", "list-3"])
            #expect(notifications[1]["state"] as? String == "parked")
            #expect(notifications[1]["user_id"] is NSNull)
            #expect(notifications[1]["original_transaction_id"] as? String == "list-3")
            #expect(notifications[0]["state"] as? String == "ignored" && notifications[0]["notification_type"] as? String == "TEST")
            let cursor = try #require(page["next_cursor"] as? String)
            let rest = try await admin("?limit=10&cursor=\(cursor)").json()
            #expect((rest["notifications"] as? [[String: Any]])?.compactMap { $0["notification_uuid"] as? String } == ["list-2", "list-1", "list-0"])
            #expect(rest["next_cursor"] is NSNull)
            let tests = try await admin("?type=TEST").json()
            #expect((tests["notifications"] as? [[String: Any]])?.count == 3)
            #expect(try await admin("?limit=0").status == 400)
            #expect(try await admin("?cursor=nope").status == 400)
            #expect(try await service.request("GET", "/v1/admin/notifications").status == 403)
        }
    }

    @Test func theFakeAppStoresPurchaseAndNotificationsReachTheService() async throws {
        try await ServiceHarness.run { service in
            let url = JSONValue.string("http://127.0.0.1:\(service.port)/v1/notifications/app-store")
            let control = { (method: String, path: String, json: JSONValue) async throws -> (status: Int, body: JSONValue?) in
                let answer = try await service.fakeCall(method, path, json)
                return (answer.status, try? JSONDecoder().decode(JSONValue.self, from: Data(answer.body)))
            }
            let token = try #require(try await service.request("GET", "/v1/users/fake-user/app-account-token").json()["app_account_token"] as? String)
            let bought = try await control("POST", "/control/storekit/purchases", [
                "product_id": .string(monthly), "type": "auto_renewable", "app_account_token": .string(token), "notify": ["url": url],
                "purchase_date": .string(RFC3339.string(from: now.addingTimeInterval(-40 * 86_400))),
            ])
            #expect(bought.status == 201, "\(String(describing: bought.body))")
            #expect(bought.body?[member: "notification"]?[member: "deliveries"] == [["status": 200]])
            let original = try #require(bought.body?[member: "original_transaction_id"]?.text)
            var premium = try #require(try await service.entitlements("fake-user").entitlement("premium"))
            #expect(premium["active"] as? Bool == false && premium["environment"] as? String == "Sandbox")

            let change = { (action: String, members: [String: JSONValue]) async throws -> JSONValue? in
                let answer = try await control("POST", "/control/storekit/purchases/\(original)/\(action)", .object(members))
                #expect(answer.status == 200, "\(action): \(String(describing: answer.body))")
                return answer.body
            }
            // Lapsed ten days ago, resubscribed now.
            let renewed = try await change("renew", ["notify": ["url": url]])
            #expect(renewed?[member: "notification"]?[member: "notification_type"] == "SUBSCRIBED")
            premium = try #require(try await service.entitlements("fake-user").entitlement("premium"))
            #expect(premium["active"] as? Bool == true)
            #expect(premium["expires_at"] as? String == renewed?[member: "payload"]?[member: "expiresDate"]
                .flatMap { if case .int(let ms) = $0 { RFC3339.string(from: Date(timeIntervalSince1970: Double(ms) / 1000)) } else { nil } })
            _ = try await change("refund", ["notify": ["url": url]])
            #expect(try await service.entitlements("fake-user").entitlement("premium")?["inactive_reason"] as? String == "refunded")
            _ = try await change("reverse_refund", ["notify": ["url": url]])
            #expect(try await service.entitlements("fake-user").entitlement("premium")?["active"] as? Bool == true)

            // Apple's retries share the notificationUUID: three copies, one stored notification.
            let off = try await change("auto_renew_off", ["notify": ["url": url, "copies": 3, "parallel": true]])
            #expect(off?[member: "notification"]?[member: "deliveries"] == [["status": 200], ["status": 200], ["status": 200]])
            #expect(try await service.entitlements("fake-user").entitlement("premium")?["will_renew"] as? Bool == false)
            let uuid = try #require(off?[member: "notification"]?[member: "notification_uuid"]?.text)
            #expect(try await service.sql("SELECT count(*)::int AS n FROM app_store_notifications WHERE notification_uuid = $1", [uuid])[0].int("n") == 1)

            // A tampered copy is refused and not stored.
            let tampered = try await control("POST", "/control/storekit/notifications", [
                "url": url, "notification_type": "DID_CHANGE_RENEWAL_STATUS", "subtype": "AUTO_RENEW_ENABLED", "tamper": true,
                "transaction_id": .string(try #require(renewed?[member: "transaction_id"]?.text)),
            ])
            #expect(tampered.body?[member: "deliveries"] == [["status": 401]])
            let stored = try await service.sql("SELECT count(*)::int AS n, count(*) FILTER (WHERE state = 'applied')::int AS applied FROM app_store_notifications")
            #expect(try stored[0].int("n") == 5 && stored[0].int("applied") == 5)
            #expect(try await service.entitlements("fake-user").entitlement("premium")?["will_renew"] as? Bool == false)
        }
    }
}
