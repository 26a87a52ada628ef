import Foundation
import Testing
import EntitlementModel

/// The instant `milliseconds` after 1970, as Apple's `_ms` fields write it.
private func ms(_ milliseconds: Double) -> Date { Date(timeIntervalSince1970: milliseconds / 1_000) }

private func response(_ name: String) throws -> AppStoreResponse {
    try AppStoreResponse(jsonData: Fixtures.data(name))
}

private func response(json: String) throws -> AppStoreResponse {
    try AppStoreResponse(jsonData: Data(json.utf8))
}

private func transaction(_ id: String, in response: AppStoreResponse) throws -> StoreTransaction {
    try #require(response.transactions().first { $0.transactionID == id })
}

@Suite struct AppStoreResponseTests {
    // MARK: Every sample decodes

    @Test func everyVerifyReceiptSampleDecodesWithTheStatusItsNameStates() throws {
        let names = Fixtures.jsonNames(prefix: "verifyreceipt_")
        #expect(names.count >= 17, "samples missing from \(Fixtures.directory.path)")
        for name in names {
            let decoded = try response(name)
            let statusInName = name.split(separator: "_")[1].dropFirst("status".count)
            #expect(String(decoded.status) == statusInName, "\(name)")
        }
    }

    /// The client-plugin wrapper is not an Apple answer: its `transactionReceipt` is what a client posts as
    /// `receipt_data`, so it must be base64 of a DER (PKCS#7) app receipt.
    @Test func everyWrappedReceiptSampleCarriesABase64AppReceipt() throws {
        struct ClientReceiptWrapper: Decodable {
            var productId: String
            var transactionReceipt: String
        }
        let names = Fixtures.jsonNames(prefix: "receipt_wrapped_")
        #expect(!names.isEmpty)
        for name in names {
            let wrapper = try JSONDecoder().decode(ClientReceiptWrapper.self, from: Fixtures.data(name))
            let der = try #require(Data(base64Encoded: wrapper.transactionReceipt), "\(name)")
            #expect(der.prefix(2) == Data([0x30, 0x82]), "\(name) is a DER SEQUENCE")
            #expect(!wrapper.productId.isEmpty)
        }
    }

    @Test func wrappedSandboxReceiptNamesItsProductAndApp() throws {
        struct ClientReceiptWrapper: Decodable {
            var productId: String
            var orderId: String
            var purchaseTime: Int64
            var transactionReceipt: String
        }
        let wrapper = try JSONDecoder().decode(
            ClientReceiptWrapper.self, from: Fixtures.data("receipt_wrapped_sandbox_consumable_and_subs_laraveliap.json")
        )
        #expect(wrapper.productId == "boost")
        #expect(wrapper.orderId == "1000000747778008")
        #expect(wrapper.purchaseTime == 1_606_677_662_000)
        let der = try #require(Data(base64Encoded: wrapper.transactionReceipt))
        #expect(der.range(of: Data("com.twigano.fashion".utf8)) != nil)
    }

    // MARK: One sample at a time

    @Test func fortyTwoInAppSandbox() throws {
        let decoded = try response("verifyreceipt_status0_42inapp_sandbox_imdhemy.json")
        #expect(decoded.status == 0)
        #expect(decoded.environment == .sandbox)
        #expect(decoded.bundleID == "com.some.thing")
        #expect(decoded.receipt?.applicationVersion == "36")
        #expect(decoded.receipt?.creationDate == ms(1_604_851_257_000))
        #expect(decoded.receipt?.inApp.count == 42)
        #expect(decoded.latestReceiptInfo.count == 1)
        #expect(decoded.latestReceipt == "ZmFrZV9kYXRh")
        let transactions = decoded.transactions()
        #expect(transactions.count == 43)
        #expect(transactions.filter { $0.productID == "one_year_subscription" }.count == 6)
        let latest = try #require(transactions.last)
        #expect(latest.transactionID == "1000000767477815")
        #expect(latest.productID == "one_month_subscription")
        #expect(latest.originalTransactionID == "1000000723811158")
        #expect(latest.expiresDate == ms(1_611_147_900_000))
        #expect(latest.subscriptionGroupIdentifier == "20667927")
        #expect(latest.webOrderLineItemID == "1000000059265094")
        #expect(latest.ownership == .purchased)
        #expect(decoded.renewalInfo() == [
            RenewalInfo(
                originalTransactionID: "1000000723811158", productID: "month_premium",
                autoRenewProductID: "one_month_subscription", willRenew: false, expirationIntent: 1,
                isInBillingRetryPeriod: false
            ),
        ])
    }

    @Test func fiveRenewalsWithoutPendingRenewalInfo() throws {
        let decoded = try response("verifyreceipt_status0_autorenew_5renewals_sandbox_itunesreceipt.json")
        #expect(decoded.environment == .sandbox)
        #expect(decoded.bundleID == "com.musteus.musteus")
        #expect(decoded.receipt?.inApp.count == 2)
        #expect(decoded.latestReceiptInfo.count == 5)
        let transactions = decoded.transactions()
        #expect(transactions.map(\.transactionID) == [
            "1000000131413546", "1000000131413602", "1000000131414118", "1000000131415612", "1000000131415863",
        ])
        #expect(transactions.map(\.isTrialPeriod) == [true, false, false, false, false])
        #expect(Set(transactions.map(\.originalTransactionID)) == ["1000000131413546"])
        #expect(transactions.last?.expiresDate == ms(1_415_806_233_000))
        #expect(transactions.last?.purchaseDate == ms(1_415_805_930_044))
        #expect(decoded.renewalInfo().isEmpty)
    }

    @Test func manyExpiredRenewalsWithRenewalInfoMissingItsOriginalTransaction() throws {
        let decoded = try response("verifyreceipt_status0_autorenew_expired_sandbox_many_renewals_itunesiap.json")
        #expect(decoded.bundleID == "com.example.app")
        #expect(decoded.receipt?.inApp.count == 13)
        #expect(decoded.latestReceiptInfo.count == 18)
        let transactions = decoded.transactions()
        #expect(transactions.count == 18)
        #expect(transactions.first?.transactionID == "1000000318012065")
        #expect(transactions.last?.transactionID == "1000000318420598")
        #expect(transactions.last?.expiresDate == ms(1_500_975_210_000))
        // pending_renewal_info has no original_transaction_id in this 2017 answer: inferred from the product.
        #expect(decoded.renewalInfo() == [
            RenewalInfo(
                originalTransactionID: "1000000318012065", productID: "testproduct", autoRenewProductID: "testproduct",
                willRenew: false, expirationIntent: 1, isInBillingRetryPeriod: false
            ),
        ])
    }

    @Test func monthlyToAnnualCrossgrade() throws {
        let decoded = try response("verifyreceipt_status0_autorenew_monthly_to_annual_sandbox_revenuecat.json")
        #expect(decoded.bundleID == "com.revenuecat.sampleapp")
        #expect(decoded.receipt?.creationDate == ms(1_595_439_548_000))
        #expect(decoded.latestReceipt == "...")
        let transactions = decoded.transactions()
        #expect(transactions.count == 9)
        #expect(transactions.filter { $0.productID == "com.revenuecat.monthly_4.99.1_week_intro" }.count == 8)
        let first = try #require(transactions.first)
        #expect(first.transactionID == "1000000692878476")
        #expect(first.isTrialPeriod)
        #expect(first.subscriptionGroupIdentifier == "20662382")
        let last = try #require(transactions.last)
        #expect(last.transactionID == "1000000696553650")
        #expect(last.productID == "com.revenuecat.annual_39.99.2_week_intro")
        #expect(last.expiresDate == ms(1_595_443_146_000))
        #expect(decoded.renewalInfo() == [
            RenewalInfo(
                originalTransactionID: "1000000692878476", productID: "com.revenuecat.annual_39.99.2_week_intro",
                autoRenewProductID: "com.revenuecat.annual_39.99.2_week_intro", willRenew: true
            ),
        ])
    }

    @Test func consumableBesideAnExpiredSubscription() throws {
        let decoded = try response("verifyreceipt_status0_consumable_and_expired_sub_sandbox_omnimind.json")
        #expect(decoded.bundleID == "club.omnichess.ios")
        #expect(decoded.receipt?.inApp.count == 38)
        #expect(decoded.latestReceipt?.hasPrefix("MIIUHgYJKoZIhvcNAQcC") == true)
        let transactions = decoded.transactions()
        #expect(transactions.count == 38)
        let coins = try transaction("2000000049266747", in: decoded)
        #expect(coins.productID == "purchase_coin_small")
        #expect(coins.expiresDate == nil)
        #expect(coins.purchaseDate == ms(1_652_039_198_000))
        #expect(coins.quantity == 1)
        // Only latest_receipt_info states the group; the in_app copy of the same transaction does not.
        let latestRenewal = try transaction("1000000908141137", in: decoded)
        #expect(latestRenewal.subscriptionGroupIdentifier == "20900603")
        #expect(latestRenewal.expiresDate == ms(1_636_560_343_000))
        #expect(decoded.renewalInfo().map(\.expirationIntent) == [1])
        #expect(decoded.renewalInfo().map(\.willRenew) == [false])
    }

    @Test func iOS6AutoRenewableWithSingleObjectLatestReceiptInfo() throws {
        let decoded = try response("verifyreceipt_status0_ios6_autorenew_itunesreceipt.json")
        #expect(decoded.environment == nil)
        #expect(decoded.bundleID == "com.notkeepingitreal.fizzbuzz")
        #expect(decoded.receipt?.applicationVersion == "1.0")
        #expect(decoded.latestReceiptInfo.count == 1)
        #expect(decoded.latestReceipt == "junk=")
        let flat = try #require(decoded.receipt?.legacyTransaction)
        #expect(flat.transactionID == "1000000055076747")
        // iOS 6: expires_date itself is in milliseconds.
        #expect(flat.expiresDate == ms(1_350_157_508_197))
        #expect(flat.purchaseDate == ms(1_350_157_208_197))
        #expect(flat.webOrderLineItemID == "1000000026553289")
        let latest = try transaction("1000000052076747", in: decoded)
        #expect(latest.expiresDate == ms(1_350_157_808_000))
        #expect(latest.originalPurchaseDate == ms(1_349_966_740_000))
        #expect(decoded.transactions().count == 2)
    }

    @Test func iOS6ReceiptWithOnlyTextDates() throws {
        let decoded = try response("verifyreceipt_status0_ios6_itunesreceipt.json")
        #expect(decoded.bundleID == "com.cerego.iknow")
        let only = try #require(decoded.transactions().first)
        #expect(decoded.transactions().count == 1)
        #expect(only.transactionID == "1000000001479608")
        #expect(only.productID == "com.cerego.iknow.30d")
        #expect(only.purchaseDate == Date(timeIntervalSince1970: 1_297_923_657))  // 2011-02-17 06:20:57 UTC
        #expect(only.expiresDate == nil)
    }

    @Test func capturediOS6TransactionReceipt() throws {
        let decoded = try response("verifyreceipt_status0_ios6_transaction_sandbox_captured_itunesiap.json")
        #expect(decoded.status == 0)
        #expect(decoded.environment == nil)
        #expect(decoded.bundleID == "com.mindmobapp.MindMob")
        #expect(decoded.receipt?.applicationVersion == "20120427")
        #expect(decoded.transactions() == [
            StoreTransaction(
                transactionID: "1000000046178817", originalTransactionID: "1000000046178817",
                productID: "com.mindmobapp.download", purchaseDate: ms(1_335_798_355_868),
                originalPurchaseDate: ms(1_335_798_355_868)
            ),
        ])
    }

    @Test func iOS7NonRenewingSubscriptions() throws {
        let decoded = try response("verifyreceipt_status0_ios7_nonrenewing_sandbox_itunesreceipt.json")
        #expect(decoded.environment == .sandbox)
        #expect(decoded.bundleID == "com.tekkinnovations.fars")
        #expect(decoded.receipt?.receiptType == "ProductionSandbox")
        #expect(decoded.receipt?.requestDate == ms(1_385_477_349_878))
        let transactions = decoded.transactions()
        #expect(transactions.map(\.transactionID) == ["1000000091176126", "1000000091221097"])
        #expect(transactions.allSatisfy { $0.expiresDate == nil && $0.purchaseDate == ms(1_385_445_528_000) })
        #expect(decoded.latestReceipt == nil)
    }

    @Test func productionSubscriptionNotRenewing() throws {
        let decoded = try response("verifyreceipt_status0_production_autorenew_not_renewing_venice.json")
        #expect(decoded.environment == .production)
        #expect(decoded.bundleID == "com.foo.bar")
        #expect(decoded.receipt?.creationDate == ms(1_401_924_047_883))
        let only = try transaction("1000000070107111", in: decoded)
        #expect(decoded.transactions().count == 1)
        #expect(only.originalTransactionID == "1000000061051111")
        // No expires_date_ms here: the text form is read.
        #expect(only.expiresDate == Date(timeIntervalSince1970: 1_403_966_873))  // 2014-06-28 14:47:53 UTC
        #expect(decoded.renewalInfo() == [
            RenewalInfo(
                originalTransactionID: "37xxxxxxxxx89", productID: "com.foo.product1",
                autoRenewProductID: "com.foo.product1", willRenew: false, expirationIntent: 1,
                isInBillingRetryPeriod: false
            ),
        ])
    }

    @Test func refundedTransactions() throws {
        let decoded = try response("verifyreceipt_status0_refunded_sandbox_monza.json")
        #expect(decoded.bundleID == "com.example.app")
        #expect(decoded.latestReceipt == "base 64 string")
        let transactions = decoded.transactions()
        #expect(transactions.map(\.transactionID) == ["1000000218147500", "1000000218147651"])
        #expect(transactions.allSatisfy { $0.cancellationDate == ms(1_466_127_848_000) })
        #expect(transactions.allSatisfy { $0.cancellationReason == "0" })
        #expect(transactions.map(\.isTrialPeriod) == [true, false])
    }

    @Test func pendingRenewalWithDuplicateLatestReceiptInfo() throws {
        let decoded = try response("verifyreceipt_status0_sandbox_pending_renewal_monza.json")
        #expect(decoded.latestReceiptInfo.count == 3)
        let transactions = decoded.transactions()
        #expect(transactions.count == 3)
        // Two copies of 1000000218147501, one without expires_date: the one with it is kept.
        let duplicated = try transaction("1000000218147501", in: decoded)
        #expect(duplicated.expiresDate == ms(1_466_127_147_996))
        #expect(duplicated.isInIntroOfferPeriod)
        #expect(decoded.renewalInfo() == [
            RenewalInfo(
                originalTransactionID: "1000000218147500", productID: "product_id",
                autoRenewProductID: "renew_product_id", willRenew: false, expirationIntent: 1,
                isInBillingRetryPeriod: false
            ),
        ])
    }

    @Test func capturedMalformedStatus() throws {
        let decoded = try response("verifyreceipt_status21002_sandbox_captured_itunesiap.json")
        #expect(decoded.status == 21002)
        #expect(decoded.receipt == nil)
        #expect(decoded.isRetryable == nil)
        #expect(decoded.transactions().isEmpty)
        #expect(decoded.renewalInfo().isEmpty)
    }

    @Test func malformedStatusWithExceptionText() throws {
        let decoded = try response("verifyreceipt_status21002_with_exception_text_itunesreceipt.json")
        #expect(decoded.status == 21002)
        #expect(decoded.exception?.hasPrefix("java.lang.IllegalArgumentException: propertyListFromString") == true)
    }

    @Test func serverUnavailableStatus() throws {
        let decoded = try response("verifyreceipt_status21005_itunesreceipt.json")
        #expect(decoded.status == 21005)
        #expect(decoded.environment == nil)
        #expect(decoded.latestReceipt == nil)
    }

    @Test func expirediOS6TrialWithTopLevelRenewalFields() throws {
        let decoded = try response("verifyreceipt_status21006_ios6_autorenew_trial_expired_venice.json")
        #expect(decoded.status == 21006)
        #expect(decoded.bundleID == "com.foo.bar")
        #expect(decoded.latestExpiredReceiptInfo.count == 1)
        let transactions = decoded.transactions()
        #expect(transactions.count == 1)
        let trial = try #require(transactions.first)
        #expect(trial.transactionID == "140000527258824")
        #expect(trial.productID == "com.foo.product1")
        #expect(trial.isTrialPeriod)
        #expect(!trial.isInIntroOfferPeriod)
        #expect(trial.expiresDate == ms(1_550_386_188_000))
        #expect(trial.webOrderLineItemID == "140000151774411")
        #expect(decoded.renewalInfo() == [
            RenewalInfo(
                originalTransactionID: "140000527258824", productID: "com.foo.product1",
                autoRenewProductID: "com.foo.product1", willRenew: false, expirationIntent: 1,
                isInBillingRetryPeriod: false
            ),
        ])
    }

    @Test func sandboxReceiptSentToProduction() throws {
        let decoded = try response("verifyreceipt_status21007_ios6_itunesreceipt.json")
        #expect(decoded.status == 21007)
        #expect(VerifyStatus(decoded) == .redirect(to: .sandbox))
        #expect(decoded.transactions().map(\.transactionID) == ["1000000001500000"])
        #expect(decoded.transactions().first?.originalTransactionID == "1000000001479608")
    }

    // MARK: V1 notifications' unified_receipt

    @Test func everyV1NotificationSampleDecodes() throws {
        let names = Fixtures.jsonNames(prefix: "notification_v1_")
        #expect(names.count >= 7)
        for name in names {
            let notification = try AppStoreNotificationV1(jsonData: Fixtures.data(name))
            #expect(!notification.notificationType.isEmpty, "\(name)")
            #expect(notification.environment != nil, "\(name)")
        }
    }

    @Test func v1RefundNotification() throws {
        let notification = try AppStoreNotificationV1(
            jsonData: Fixtures.data("notification_v1_cancel_refund_prod_monza.json")
        )
        #expect(notification.notificationType == "CANCEL")
        #expect(notification.environment == .production)
        #expect(notification.password == "password")
        #expect(notification.unifiedReceiptStatus == nil)
        #expect(notification.latestReceipt == "<base 64>")
        let refunded = try #require(notification.transactions().first)
        #expect(refunded.transactionID == "720000240377671")
        #expect(refunded.cancellationDate == ms(1_521_757_701_000))
        #expect(refunded.cancellationReason == "0")
        #expect(refunded.expiresDate == ms(1_551_912_249_000))
        #expect(notification.renewalInfo() == [
            RenewalInfo(
                originalTransactionID: "720000238499386", productID: "com.PremiumYearly",
                autoRenewProductID: "com.PremiumYearly", willRenew: false
            ),
        ])
    }

    @Test func v1RenewalPreferenceChangeNamesTheNextProduct() throws {
        let notification = try AppStoreNotificationV1(
            jsonData: Fixtures.data("notification_v1_did_change_renewal_pref_sandbox_monza.json")
        )
        #expect(notification.notificationType == "DID_CHANGE_RENEWAL_PREF")
        #expect(notification.environment == .sandbox)
        #expect(notification.transactions().map(\.transactionID) == ["1000000383196805"])
        #expect(notification.renewalInfo() == [
            RenewalInfo(
                originalTransactionID: "1000000383185294", productID: "product_id.annual",
                autoRenewProductID: "product_id.quarterly", willRenew: true
            ),
        ])
    }

    @Test func v1RenewalStatusChangeWithUpgrades() throws {
        let notification = try AppStoreNotificationV1(
            jsonData: Fixtures.data("notification_v1_did_change_renewal_status_sandbox_laraveliap.json")
        )
        #expect(notification.notificationType == "DID_CHANGE_RENEWAL_STATUS")
        #expect(notification.unifiedReceiptStatus == 0)
        let transactions = notification.transactions()
        #expect(transactions.count == 54)
        #expect(transactions.filter(\.isUpgraded).map(\.transactionID).sorted() == [
            "1000000739321864", "1000000739325308", "1000000739325323", "1000000739325339",
        ])
        #expect(transactions.filter(\.isUpgraded).allSatisfy { $0.productID == "year_premium" })
        #expect(transactions.last?.transactionID == "1000000746095599")
        #expect(notification.renewalInfo() == [
            RenewalInfo(
                originalTransactionID: "1000000723811158", productID: "month_premium",
                autoRenewProductID: "month_premium", willRenew: false, expirationIntent: 1,
                isInBillingRetryPeriod: false
            ),
        ])
    }

    @Test func v1UnifiedReceiptRenewal() throws {
        let notification = try AppStoreNotificationV1(
            jsonData: Fixtures.data("notification_v1_renewal_unified_receipt_sandbox_monza.json")
        )
        #expect(notification.notificationType == "RENEWAL")
        #expect(notification.unifiedReceiptStatus == 0)
        #expect(notification.environment == .sandbox)
        #expect(notification.transactions().count == 22)
        #expect(notification.transactions().last?.expiresDate == ms(1_594_910_502_000))
        #expect(notification.renewalInfo().map(\.originalTransactionID) == ["1000000715982567"])
        #expect(notification.renewalInfo().map(\.willRenew) == [true])
    }

    @Test func v1InitialBuyInteractiveRenewalAndRenewal() throws {
        let expected: [(String, String, String, String)] = [
            ("notification_v1_initial_buy_sandbox_monza.json", "INITIAL_BUY", "1000000383185294", "product_id.annual"),
            ("notification_v1_interactive_renewal_sandbox_monza.json", "INTERACTIVE_RENEWAL", "1000000383189797",
             "product_id.annual"),
            ("notification_v1_renewal_sandbox_monza.json", "RENEWAL", "1000000383189543", "product_id.quarterly"),
        ]
        for (name, type, transactionID, productID) in expected {
            let notification = try AppStoreNotificationV1(jsonData: Fixtures.data(name))
            #expect(notification.notificationType == type)
            #expect(notification.transactions().map(\.transactionID) == [transactionID])
            #expect(notification.transactions().map(\.productID) == [productID])
            #expect(notification.transactions().map(\.originalTransactionID) == ["1000000383185294"])
            #expect(notification.renewalInfo().map(\.willRenew) == [true])
        }
    }

    // MARK: Lenient values

    @Test(arguments: [
        (#""true""#, true), (#""false""#, false), (#""1""#, true), (#""0""#, false),
        ("true", true), ("false", false), ("1", true), ("0", false),
    ])
    func booleansInEverySpelling(spelling: String, value: Bool) throws {
        let decoded = try response(json: """
            {"status": 0, "latest_receipt_info": [{"transaction_id": "1", "product_id": "p",
             "purchase_date_ms": "1000", "is_trial_period": \(spelling), "is_upgraded": \(spelling),
             "is_in_intro_offer_period": \(spelling)}]}
            """)
        let only = try #require(decoded.transactions().first)
        #expect(only.isTrialPeriod == value)
        #expect(only.isUpgraded == value)
        #expect(only.isInIntroOfferPeriod == value)
    }

    @Test(arguments: [#""is-retryable": 1"#, #""is-retryable": true"#, #""is_retryable": "true""#,
                      #""is_retryable": "1""#])
    func retryableFlagInEverySpelling(field: String) throws {
        #expect(try response(json: #"{"status": 21199, \#(field)}"#).isRetryable == true)
    }

    @Test func numbersAsNumbersAndStatusAsString() throws {
        let decoded = try response(json: """
            {"status": "0", "receipt": {"bundle_id": "com.example", "in_app": [
              {"transaction_id": 1000000046178817, "original_transaction_id": 1000000046178800,
               "product_id": "p", "purchase_date_ms": 1335798355868, "quantity": 3,
               "expires_date_ms": 1335798955868.0, "web_order_line_item_id": 77}]}}
            """)
        #expect(decoded.status == 0)
        let only = try #require(decoded.transactions().first)
        #expect(only.transactionID == "1000000046178817")
        #expect(only.originalTransactionID == "1000000046178800")
        #expect(only.purchaseDate == ms(1_335_798_355_868))
        #expect(only.expiresDate == ms(1_335_798_955_868))
        #expect(only.quantity == 3)
        #expect(only.webOrderLineItemID == "77")
    }

    @Test func fractionalMilliseconds() throws {
        let decoded = try response(json: """
            {"status": 0, "latest_receipt_info": {"transaction_id": "0", "product_id": "p",
             "purchase_date_ms": "1697679936049.7297", "expires_date": "1697680236049.5"}}
            """)
        let only = try #require(decoded.transactions().first)
        #expect(only.transactionID == "0")
        #expect(only.purchaseDate == ms(1_697_679_936_049.7297))
        #expect(only.expiresDate == ms(1_697_680_236_049.5))
    }

    @Test func everyMappedTransactionAndRenewalField() throws {
        let decoded = try response(json: """
            {"status": 0, "environment": "Production", "unknown_field": {"nested": [1, 2]},
             "receipt": {"bundle_id": "com.example", "application_version": "7", "in_app": []},
             "latest_receipt_info": [{"transaction_id": "20", "original_transaction_id": "10", "product_id": "p",
               "purchase_date_ms": "2000", "original_purchase_date_ms": "1000", "expires_date_ms": "3000",
               "cancellation_date_ms": "2500", "cancellation_reason": "1", "is_upgraded": "true",
               "in_app_ownership_type": "FAMILY_SHARED", "subscription_group_identifier": "g1",
               "web_order_line_item_id": "w1", "app_account_token": "6F3B1E4C-0000-4000-8000-000000000001",
               "promotional_offer_id": "promo", "offer_code_ref_name": "ignored"}],
             "pending_renewal_info": [{"original_transaction_id": "10", "product_id": "p",
               "auto_renew_product_id": "q", "auto_renew_status": "1", "expiration_intent": "2",
               "is_in_billing_retry_period": "1", "grace_period_expires_date_ms": "4000",
               "price_consent_status": "0"}]}
            """)
        #expect(decoded.environment == .production)
        #expect(decoded.transactions() == [
            StoreTransaction(
                transactionID: "20", originalTransactionID: "10", productID: "p", purchaseDate: ms(2000),
                originalPurchaseDate: ms(1000), expiresDate: ms(3000), cancellationDate: ms(2500),
                cancellationReason: "1", isUpgraded: true, ownership: .familyShared, webOrderLineItemID: "w1",
                subscriptionGroupIdentifier: "g1", appAccountToken: "6F3B1E4C-0000-4000-8000-000000000001",
                promotionalOfferID: "promo"
            ),
        ])
        #expect(decoded.renewalInfo() == [
            RenewalInfo(
                originalTransactionID: "10", productID: "p", autoRenewProductID: "q", willRenew: true,
                expirationIntent: 2, isInBillingRetryPeriod: true, gracePeriodExpiresDate: ms(4000),
                priceConsentStatus: 0
            ),
        ])
    }

    @Test func duplicateKeepsTheRicherEntryAndFillsItsGaps() throws {
        let decoded = try response(json: """
            {"status": 0,
             "receipt": {"bundle_id": "b", "in_app": [{"transaction_id": "5", "product_id": "p",
               "purchase_date_ms": "1000", "expires_date_ms": "2000", "app_account_token": "tok"}]},
             "latest_receipt_info": [{"transaction_id": "5", "product_id": "p", "purchase_date_ms": "1000",
               "expires_date_ms": "2000", "cancellation_date_ms": "1500", "cancellation_reason": "0",
               "subscription_group_identifier": "g"}]}
            """)
        #expect(decoded.transactions().count == 1)
        let merged = try transaction("5", in: decoded)
        #expect(merged.cancellationDate == ms(1500))
        #expect(merged.cancellationReason == "0")
        #expect(merged.subscriptionGroupIdentifier == "g")
        #expect(merged.appAccountToken == "tok")
    }

    @Test func richerCopyWinsWhereCopiesDisagree() throws {
        let decoded = try response(json: """
            {"status": 0,
             "receipt": {"in_app": [{"transaction_id": "5", "original_transaction_id": "4", "product_id": "p",
               "purchase_date_ms": "1000", "quantity": "2", "expires_date_ms": "2000",
               "cancellation_date_ms": "1500"}]},
             "latest_receipt_info": [{"transaction_id": "5", "product_id": "p", "purchase_date_ms": "900"}]}
            """)
        let merged = try transaction("5", in: decoded)
        #expect(merged.originalTransactionID == "4")
        #expect(merged.purchaseDate == ms(1000))
        #expect(merged.quantity == 2)
    }

    @Test func equallyDetailedCopiesPreferLatestReceiptInfo() throws {
        let decoded = try response(json: """
            {"status": 0,
             "receipt": {"in_app": [{"transaction_id": "5", "product_id": "p", "purchase_date_ms": "1000"}]},
             "latest_receipt_info": [{"transaction_id": "5", "product_id": "p", "purchase_date_ms": "900"}]}
            """)
        #expect(try transaction("5", in: decoded).purchaseDate == ms(900))
    }

    @Test func nullsAndEmptyStringsCountAsAbsent() throws {
        let decoded = try response(json: """
            {"status": 0, "environment": null, "latest_receipt": null, "pending_renewal_info": null,
             "latest_receipt_info": [{"transaction_id": "1", "product_id": "p", "purchase_date_ms": "1",
               "expires_date_ms": null, "app_account_token": "", "is_trial_period": null}]}
            """)
        let only = try #require(decoded.transactions().first)
        #expect(decoded.environment == nil)
        #expect(only.expiresDate == nil)
        #expect(only.appAccountToken == nil)
        #expect(!only.isTrialPeriod)
    }

    // MARK: Malformed bodies

    @Test(arguments: [
        ("not json", ""),
        ("[]", ""),
        (#"{"environment": "Sandbox"}"#, "status"),
        (#"{"status": "zero"}"#, "status"),
        (#"{"status": 0, "receipt": {"in_app": [{"product_id": "p", "purchase_date_ms": "1"}]}}"#,
         "receipt.in_app[0].transaction_id"),
        (#"{"status": 0, "latest_receipt_info": [{"transaction_id": "1", "product_id": "p"}]}"#,
         "latest_receipt_info[0].purchase_date_ms"),
        (#"{"status": 0, "latest_receipt_info": [{"transaction_id": "1", "product_id": "p", "purchase_date_ms": "soon"}]}"#,
         "latest_receipt_info[0].purchase_date_ms"),
        (#"{"status": 0, "latest_receipt_info": [{"transaction_id": "1", "product_id": "p", "purchase_date_ms": "1", "expires_date": "tomorrow"}]}"#,
         "latest_receipt_info[0].expires_date"),
        (#"{"status": 0, "pending_renewal_info": [{"product_id": "p", "auto_renew_status": "maybe"}]}"#,
         "pending_renewal_info[0].auto_renew_status"),
        (#"{"status": 0, "receipt": "base64"}"#, "receipt"),
    ])
    func malformedBodyNamesTheField(body: String, path: String) {
        let error = #expect(throws: AppStoreDecodingError.self) { try response(json: body) }
        #expect(error?.path == path)
        #expect(error?.description.hasPrefix("malformed App Store body") == true)
    }

    @Test func malformedNotificationNamesTheField() {
        let error = #expect(throws: AppStoreDecodingError.self) {
            try AppStoreNotificationV1(jsonData: Data(#"{"password": "x", "unified_receipt": {}}"#.utf8))
        }
        #expect(error?.path == "notification_type")
    }
}
