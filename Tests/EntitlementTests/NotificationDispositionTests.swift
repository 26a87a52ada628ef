import Foundation
import Testing
import EntitlementModel

/// Every V2 notification type and subtype Apple documents, mapped to what the service records or ignores.
@Suite struct NotificationDispositionTests {
    @Test(arguments: [
        ("SUBSCRIBED", "INITIAL_BUY", NotificationChange.purchase),
        ("SUBSCRIBED", "RESUBSCRIBE", .purchase),
        ("ONE_TIME_CHARGE", nil, .purchase),
        ("OFFER_REDEEMED", "INITIAL_BUY", .purchase),
        ("OFFER_REDEEMED", "RESUBSCRIBE", .purchase),
        ("OFFER_REDEEMED", "UPGRADE", .purchase),
        ("OFFER_REDEEMED", "DOWNGRADE", .purchase),
        ("DID_RENEW", nil, .renewal),
        ("DID_RENEW", "BILLING_RECOVERY", .renewal),
        ("DID_CHANGE_RENEWAL_STATUS", "AUTO_RENEW_ENABLED", .renewalPreference),
        ("DID_CHANGE_RENEWAL_STATUS", "AUTO_RENEW_DISABLED", .renewalPreference),
        ("DID_CHANGE_RENEWAL_PREF", "UPGRADE", .renewalPreference),
        ("DID_CHANGE_RENEWAL_PREF", "DOWNGRADE", .renewalPreference),
        ("DID_CHANGE_RENEWAL_PREF", nil, .renewalPreference),
        ("PRICE_INCREASE", "PENDING", .priceIncrease),
        ("PRICE_INCREASE", "ACCEPTED", .priceIncrease),
        ("DID_FAIL_TO_RENEW", nil, .billingIssue),
        ("DID_FAIL_TO_RENEW", "GRACE_PERIOD", .billingIssue),
        ("GRACE_PERIOD_EXPIRED", nil, .gracePeriodExpired),
        ("EXPIRED", "VOLUNTARY", .expiration),
        ("EXPIRED", "BILLING_RETRY", .expiration),
        ("EXPIRED", "PRICE_INCREASE", .expiration),
        ("EXPIRED", "PRODUCT_NOT_FOR_SALE", .expiration),
        ("REFUND", nil, .refund),
        ("REFUND_DECLINED", nil, .refundDeclined),
        ("REFUND_REVERSED", nil, .refundReversed),
        ("REVOKE", nil, .revocation),
        ("RENEWAL_EXTENDED", nil, .renewalExtension),
        ("RENEWAL_EXTENSION", "FAILURE", .renewalExtension),
        ("CONSUMPTION_REQUEST", nil, .consumptionRequest),
        ("A_TYPE_APPLE_ADDS_LATER", nil, .other),
    ] as [(String, String?, NotificationChange)])
    func recordedTypes(type: String, subtype: String?, change: NotificationChange) {
        #expect(NotificationDisposition.of(type: type, subtype: subtype, carriesSignedData: true) == .record(change))
        // Without a signed transaction or renewal info there is nothing to record.
        #expect(NotificationDisposition.of(type: type, subtype: subtype, carriesSignedData: false) == .ignore(.nothingSigned))
    }

    @Test(arguments: [
        ("TEST", nil, IgnoredNotification.test),
        ("RENEWAL_EXTENSION", "SUMMARY", .summary),
        ("EXTERNAL_PURCHASE_TOKEN", "UNREPORTED", .externalPurchase),
        ("EXTERNAL_PURCHASE_TOKEN", nil, .externalPurchase),
    ] as [(String, String?, IgnoredNotification)])
    func ignoredTypes(type: String, subtype: String?, reason: IgnoredNotification) {
        #expect(NotificationDisposition.of(type: type, subtype: subtype, carriesSignedData: true) == .ignore(reason))
        #expect(NotificationDisposition.of(type: type, subtype: subtype, carriesSignedData: false) == .ignore(reason))
    }

    @Test func onlyAReversalRestatesTheTransaction() {
        let refunded = StoreTransaction(transactionID: "t1", originalTransactionID: "t1", productID: "p", purchaseDate: Date(timeIntervalSince1970: 1),
                                        cancellationDate: Date(timeIntervalSince1970: 2), cancellationReason: "1")
        for change in NotificationChange.allCases where change != .refundReversed {
            #expect(change.stating(refunded) == refunded)
        }
        let reversed = NotificationChange.refundReversed.stating(refunded)
        #expect(reversed.cancellationDate == nil && reversed.cancellationReason == nil)
        #expect(reversed.transactionID == "t1" && reversed.purchaseDate == refunded.purchaseDate)
    }

    @Test func decodedPayloadsGiveTheirDisposition() throws {
        let subscribed = try AppStoreNotificationV2(jsonData: Data("""
            {"notificationType": "SUBSCRIBED", "subtype": "INITIAL_BUY", "notificationUUID": "u-1", "signedDate": 1700000000123,
             "data": {"bundleId": "com.example.app", "environment": "Sandbox", "signedTransactionInfo": "a.b.c", "signedRenewalInfo": "d.e.f"}}
            """.utf8))
        #expect(subscribed.disposition == .record(.purchase))
        #expect(subscribed.signedDate == Date(timeIntervalSince1970: 1_700_000_000.123))
        #expect(!subscribed.isSummary)

        let summary = try AppStoreNotificationV2(jsonData: Data("""
            {"notificationType": "RENEWAL_EXTENSION", "subtype": "SUMMARY", "notificationUUID": "u-2", "signedDate": 1700000000000,
             "summary": {"bundleId": "com.example.app", "environment": "Production", "requestIdentifier": "r", "succeededCount": 3}}
            """.utf8))
        #expect(summary.isSummary)
        #expect(summary.disposition == .ignore(.summary))
        #expect(summary.bundleID == "com.example.app")

        let test = try AppStoreNotificationV2(jsonData: Data("""
            {"notificationType": "TEST", "notificationUUID": "u-3", "signedDate": 1700000000000,
             "data": {"bundleId": "com.example.app", "environment": "Sandbox"}}
            """.utf8))
        #expect(test.disposition == .ignore(.test))

        let renewalOnly = try AppStoreNotificationV2(jsonData: Data("""
            {"notificationType": "DID_CHANGE_RENEWAL_STATUS", "subtype": "AUTO_RENEW_DISABLED", "notificationUUID": "u-4",
             "signedDate": 1700000000000, "data": {"bundleId": "com.example.app", "environment": "Sandbox", "signedRenewalInfo": "d.e.f"}}
            """.utf8))
        #expect(renewalOnly.disposition == .record(.renewalPreference))
    }

    @Test func signedPayloadsCarryTheirSigningDate() throws {
        let transaction = try AppStoreTransactionV2(jsonData: Data("""
            {"transactionId": "t9", "originalTransactionId": "t1", "productId": "p", "purchaseDate": 1700000000000, "signedDate": 1700000005000}
            """.utf8))
        #expect(transaction.transaction.signedDate == Date(timeIntervalSince1970: 1_700_000_005))
        let renewal = try AppStoreRenewalInfoV2(jsonData: Data("""
            {"originalTransactionId": "t1", "productId": "p", "autoRenewStatus": 1, "signedDate": 1700000006000}
            """.utf8))
        #expect(renewal.renewal.signedDate == Date(timeIntervalSince1970: 1_700_000_006))
    }
}
