import EntitlementModel
import Foundation
import Testing
@testable import FakeAppStore
@testable import ServiceRuntime

/// The fake's StoreKit 2 store without HTTP: purchases of each type, a subscription's lifecycle, and the
/// payloads in Apple's shape.
@Suite struct FakeStoreKitTests {
    static let now: Int64 = 1_767_225_600_000  // 2026-01-01T00:00:00Z
    static let day: Int64 = 86_400_000

    static func store() -> FakeStoreKit {
        FakeStoreKit(settings: .init(bundleID: "com.example.app", appAppleID: 1_234_567_890), firstID: 2_000_000_000_000_000)
    }

    static func members(_ value: JSONValue?) -> [String: JSONValue] {
        if case .object(let members)? = value { members } else { [:] }
    }

    @Test(arguments: [
        (ProductType.consumable, "Consumable"), (.nonConsumable, "Non-Consumable"),
        (.autoRenewable, "Auto-Renewable Subscription"), (.nonRenewing, "Non-Renewing Subscription"),
    ])
    func eachProductTypeIsSignedInApplesShape(type: ProductType, appleType: String) throws {
        var store = Self.store()
        let change = try store.purchase(.init(productID: "com.example.p", type: type, appAccountToken: "7e3fb20b-4cdb-47cc-936d-99d65f608138",
                                              quantity: 2), now: Self.now)
        let transaction = try #require(store.transactions[change.transactionID])
        let payload = Self.members(FakeStoreKit.payload(transaction, signedDate: Self.now + 5))
        let subscription = type == .autoRenewable
        #expect(payload["type"] == .string(appleType))
        #expect(payload["transactionId"] == .string(change.transactionID) && payload["originalTransactionId"] == .string(change.transactionID))
        #expect(payload["purchaseDate"] == .int(Int(Self.now)) && payload["originalPurchaseDate"] == .int(Int(Self.now)))
        #expect(payload["signedDate"] == .int(Int(Self.now + 5)))
        #expect(payload["bundleId"] == "com.example.app" && payload["environment"] == "Sandbox" && payload["quantity"] == 2)
        #expect(payload["inAppOwnershipType"] == "PURCHASED" && payload["transactionReason"] == "PURCHASE")
        #expect(payload["storefront"] == "USA" && payload["storefrontId"] == "143441" && payload["price"] == 990 && payload["currency"] == "USD")
        #expect(payload["appAccountToken"] == "7e3fb20b-4cdb-47cc-936d-99d65f608138")
        #expect((payload["expiresDate"] != nil) == subscription)
        #expect((payload["webOrderLineItemId"] != nil) == subscription && (payload["subscriptionGroupIdentifier"] != nil) == subscription)
        #expect(payload["revocationDate"] == nil && payload["isUpgraded"] == nil)
        #expect((store.renewalPayload(change.transactionID, signedDate: Self.now) != nil) == subscription)
        #expect(change.notificationType == (subscription ? "SUBSCRIBED" : "ONE_TIME_CHARGE"))
        #expect(change.subtype == (subscription ? "INITIAL_BUY" : nil))
        // The service's own decoder reads it as the transaction the store holds.
        let decoded = try AppStoreTransactionV2(jsonData: Data(JSONValue.object(payload).jsonText.utf8))
        #expect(decoded.transaction.transactionID == change.transactionID && decoded.transaction.quantity == 2)
        #expect(decoded.productType == appleType && decoded.environment == .sandbox && decoded.bundleID == "com.example.app")
        #expect(decoded.transaction.expiresDate == transaction.expiresDate.map(Date.init(milliseconds:)))
    }

    @Test func subscriptionRunsThroughItsLifecycle() throws {
        var store = Self.store()
        let now = Self.now
        let original = try store.purchase(.init(productID: "monthly", type: .autoRenewable), now: now).transactionID
        let firstExpiry = try #require(store.transactions[original]?.expiresDate)
        #expect(firstExpiry == 1_769_904_000_000)  // one calendar month: 2026-02-01
        #expect(store.status(of: original, now: now) == .active)

        let failed = try store.failRenewal(original, graceUntil: now + 3 * Self.day, now: now)
        #expect(failed.notificationType == "DID_FAIL_TO_RENEW" && failed.subtype == "GRACE_PERIOD" && failed.transactionID == original)
        #expect(store.status(of: original, now: now) == .gracePeriod)
        #expect(store.status(of: original, now: now + 4 * Self.day) == .billingRetry)
        #expect(store.transactions[original]?.expiresDate == now)
        let renewal = Self.members(store.renewalPayload(original, signedDate: now))
        #expect(renewal["isInBillingRetryPeriod"] == true && renewal["expirationIntent"] == 2 && renewal["autoRenewStatus"] == 1)
        #expect(renewal["gracePeriodExpiresDate"] == .int(Int(now + 3 * Self.day)))

        let recovered = try store.renew(original, now: now + Self.day)
        #expect(recovered.notificationType == "DID_RENEW" && recovered.subtype == "BILLING_RECOVERY")
        let second = try #require(store.transactions[recovered.transactionID])
        #expect(second.purchaseDate == now + Self.day && second.originalPurchaseDate == now && second.transactionReason == "RENEWAL")
        #expect(second.webOrderLineItemID != store.transactions[original]?.webOrderLineItemID)
        #expect(store.status(of: original, now: now + Self.day) == .active)
        #expect(Self.members(store.renewalPayload(original, signedDate: now))["isInBillingRetryPeriod"] == false)

        // A renewal of a running subscription starts where the period ends.
        let renewed = try store.renew(original, now: now + Self.day)
        #expect(renewed.notificationType == "DID_RENEW" && renewed.subtype == nil)
        #expect(store.transactions[renewed.transactionID]?.purchaseDate == second.expiresDate)
        #expect(store.chain(original).map(\.transactionID) == [original, recovered.transactionID, renewed.transactionID])

        #expect(try store.setAutoRenew(original, false).subtype == "AUTO_RENEW_DISABLED")
        #expect(Self.members(store.renewalPayload(original, signedDate: now))["autoRenewStatus"] == 0)
        let expired = try store.expire(original, intent: 1, date: nil, now: now + 2 * Self.day)
        #expect(expired.notificationType == "EXPIRED" && expired.subtype == "VOLUNTARY")
        #expect(store.status(of: original, now: now + 2 * Self.day) == .expired)
        #expect(Self.members(store.renewalPayload(original, signedDate: now))["expirationIntent"] == 1)

        let back = try store.renew(original, now: now + 3 * Self.day)
        #expect(back.notificationType == "SUBSCRIBED" && back.subtype == "RESUBSCRIBE")
        #expect(Self.members(store.renewalPayload(original, signedDate: now))["recentSubscriptionStartDate"] == .int(Int(now + 3 * Self.day)))

        let refunded = try store.revoke(original, transactionID: nil, reason: 1, date: nil, familyRevoke: false, now: now + 4 * Self.day)
        #expect(refunded.notificationType == "REFUND" && refunded.transactionID == back.transactionID)
        #expect(store.status(of: original, now: now + 4 * Self.day) == .revoked)
        let refundPayload = Self.members(FakeStoreKit.payload(try #require(store.transactions[back.transactionID]), signedDate: now))
        #expect(refundPayload["revocationDate"] == .int(Int(now + 4 * Self.day)) && refundPayload["revocationReason"] == 1)
        #expect(try store.reverseRefund(original, transactionID: nil).notificationType == "REFUND_REVERSED")
        #expect(store.status(of: original, now: now + 4 * Self.day) == .active)
    }

    @Test func upgradeStartsANewPeriodAndDowngradeWaitsForTheRenewal() throws {
        var store = Self.store()
        let original = try store.purchase(.init(productID: "basic", type: .autoRenewable), now: Self.now).transactionID
        let upgraded = try store.upgrade(original, to: "premium", transactionID: "up-1", expiresDate: nil, now: Self.now + Self.day)
        #expect(upgraded == .init(transactionID: "up-1", notificationType: "DID_CHANGE_RENEWAL_PREF", subtype: "UPGRADE"))
        #expect(store.transactions[original]?.isUpgraded == true)
        #expect(Self.members(FakeStoreKit.payload(try #require(store.transactions[original]), signedDate: Self.now))["isUpgraded"] == true)
        let new = try #require(store.transactions["up-1"])
        #expect(new.productID == "premium" && new.purchaseDate == Self.now + Self.day && new.originalTransactionID == original && !new.isUpgraded)

        let downgraded = try store.downgrade(original, to: "basic")
        #expect(downgraded.subtype == "DOWNGRADE" && downgraded.transactionID == "up-1")
        #expect(Self.members(store.renewalPayload(original, signedDate: Self.now))["autoRenewProductId"] == "basic")
        #expect(Self.members(store.renewalPayload(original, signedDate: Self.now))["productId"] == "premium")
        let next = try store.renew(original, now: Self.now + Self.day)
        #expect(store.transactions[next.transactionID]?.productID == "basic")
    }

    @Test func refusalsSayWhy() throws {
        var store = Self.store()
        let consumable = try store.purchase(.init(productID: "coins", type: .consumable, transactionID: "c-1"), now: Self.now).transactionID
        #expect(consumable == "c-1")
        func refusal(_ change: (inout FakeStoreKit) throws -> FakeStoreKit.Change) -> FakeStoreKitError? {
            do {
                _ = try change(&store)
                return nil
            } catch {
                return error as? FakeStoreKitError
            }
        }
        #expect(refusal { try $0.purchase(.init(productID: "coins", type: .consumable, transactionID: "c-1"), now: Self.now) }?.status == 409)
        #expect(refusal { try $0.purchase(.init(type: .consumable), now: Self.now) }?.field == "product_id")
        #expect(refusal { try $0.purchase(.init(productID: "x"), now: Self.now) }?.field == "type")
        #expect(refusal { try $0.purchase(.init(productID: "x", type: .autoRenewable, purchaseDate: Self.now, expiresDate: Self.now), now: Self.now) }?.field == "expires_date")
        #expect(refusal { try $0.purchase(.init(productID: "x", type: .consumable, expiresDate: Self.now + 1), now: Self.now) }?.field == "expires_date")
        #expect(refusal { try $0.renew("c-1", now: Self.now) }?.status == 409)
        #expect(refusal { try $0.renew("nope", now: Self.now) }?.status == 404)
        #expect(refusal { try $0.purchase(.init(type: .consumable, originalTransactionID: "c-1"), now: Self.now) }?.field == "type")
        #expect(refusal { try $0.revoke("c-1", transactionID: "other", reason: 0, date: nil, familyRevoke: false, now: Self.now) }?.field == "transaction_id")
        #expect(refusal { try $0.revoke("c-1", transactionID: nil, reason: 0, date: nil, familyRevoke: true, now: Self.now) } == nil)
        #expect(refusal { try $0.revoke("c-1", transactionID: nil, reason: 0, date: nil, familyRevoke: false, now: Self.now) }?.status == 409)
        #expect(store.transactions.count == 1)
    }

    @Test func notificationCarriesTheSignedPurchaseAndTheSubscriptionStatus() async throws {
        var store = Self.store()
        let chain = FakeSigningChain.make()
        let original = try store.purchase(.init(productID: "monthly", type: .autoRenewable, environment: .production), now: Self.now).transactionID
        let payload = store.notificationPayload(
            type: "SUBSCRIBED", subtype: "INITIAL_BUY", uuid: "u-1", transactionID: original, environment: .sandbox,
            signedDate: Self.now, now: Self.now, chain: chain)
        let members = Self.members(payload)
        #expect(members["notificationType"] == "SUBSCRIBED" && members["subtype"] == "INITIAL_BUY" && members["notificationUUID"] == "u-1")
        #expect(members["version"] == "2.0" && members["signedDate"] == .int(Int(Self.now)))
        let data = Self.members(members["data"])
        #expect(Set(data.keys) == ["appAppleId", "bundleId", "bundleVersion", "environment", "signedTransactionInfo", "signedRenewalInfo", "status"])
        #expect(data["appAppleId"] == 1_234_567_890 && data["environment"] == "Production" && data["status"] == 1)
        guard case .string(let transaction)? = data["signedTransactionInfo"], case .string(let renewal)? = data["signedRenewalInfo"] else {
            Issue.record("no signed transaction or renewal info")
            return
        }
        #expect(Self.members(try await SignedJWSCheck.verify(transaction, root: chain.root))["transactionId"] == .string(original))
        #expect(Self.members(try await SignedJWSCheck.verify(renewal, root: chain.root))["originalTransactionId"] == .string(original))
        let decoded = try AppStoreNotificationV2(jsonData: Data(payload.jsonText.utf8))
        #expect(decoded.bundleID == "com.example.app" && decoded.environment == .production)

        let test = Self.members(store.notificationPayload(
            type: "TEST", subtype: nil, uuid: "u-2", transactionID: nil, environment: .sandbox, signedDate: Self.now, now: Self.now, chain: chain))
        #expect(test["subtype"] == nil && Set(Self.members(test["data"]).keys) == ["appAppleId", "bundleId", "bundleVersion", "environment"])
    }

    /// The same purchases read through verifyReceipt: one model for both.
    @Test func receiptHoldsTheSamePurchases() throws {
        var store = Self.store()
        let token = "7e3fb20b-4cdb-47cc-936d-99d65f608138"
        let original = try store.purchase(.init(productID: "basic", type: .autoRenewable, appAccountToken: token), now: Self.now).transactionID
        _ = try store.upgrade(original, to: "premium", transactionID: "up-1", expiresDate: nil, now: Self.now + Self.day)
        _ = try store.purchase(.init(productID: "coins", type: .consumable, appAccountToken: token, transactionID: "c-1"), now: Self.now)
        _ = try store.purchase(.init(productID: "coins", type: .consumable, transactionID: "c-2"), now: Self.now)
        _ = try store.purchase(.init(productID: "coins", type: .consumable, environment: .production, transactionID: "c-3"), now: Self.now)
        let receipt = try #require(FakeReceipt(receiptData: store.receipt(environment: .sandbox, appAccountToken: token).receiptData))
        #expect(receipt.environment == .sandbox && receipt.bundleID == "com.example.app")
        #expect(Set(receipt.inApp.map(\.transactionID)) == [original, "up-1", "c-1"])
        #expect(receipt.latestReceiptInfo.map(\.transactionID) == [original, "up-1"])
        let upgraded = try #require(receipt.inApp.first { $0.transactionID == original })
        #expect(upgraded.isUpgraded && upgraded.cancellationDate == Date(milliseconds: Self.now + Self.day))
        #expect(receipt.pendingRenewalInfo.map(\.autoRenewProductID) == ["premium"])
        #expect(store.receipt(environment: .sandbox, appAccountToken: nil).inApp.count == 4)
        #expect(store.receipt(environment: .production, appAccountToken: nil).inApp.map(\.transactionID) == ["c-3"])
    }
}
