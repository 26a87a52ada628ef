import Crypto
import EntitlementModel
import Foundation
import Testing
import X509
@testable import AppStore
@testable import EntitlementService
@testable import FakeAppStore
@testable import ServiceRuntime

/// The shared App Store JWS samples against `SignedPayloadVerifier`, with the outcome SOURCES.md gives each.
@Suite struct SignedPayloadTests {
    let apple = SignedPayloadVerifier(roots: [AppleRootCertificate.g3])
    let appleLibrary: SignedPayloadVerifier

    init() throws {
        appleLibrary = SignedPayloadVerifier(roots: [try Certificate(derEncoded: Array(Fixtures.data("cert_applelib_test_root_ca.der")))])
    }

    private func text(_ name: String) throws -> String {
        String(decoding: try Fixtures.data(name), as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    private func signedPayload(ofBody name: String) throws -> String {
        let body = try JSONSerialization.jsonObject(with: Fixtures.data(name)) as? [String: Any]
        return try #require(body?["signedPayload"] as? String)
    }

    static let appleSigned = [
        "jws_renewalinfo_autorenew_off_voluntary_sandbox_gopay.jws", "jws_renewalinfo_autorenew_on_sandbox_goiap.jws",
        "jws_transaction_autorenew_intro_offer_sandbox_gopay.jws", "jws_transaction_autorenew_renewal_sandbox_gopay.jws",
        "notification_v2_consumption_request_consumable_production_gopay.jws",
    ]

    @Test(arguments: appleSigned)
    func realAppStorePayloadsVerifyAgainstAppleRootG3AtTheirSigningDate(_ name: String) throws {
        let jws = try text(name)
        #expect(throws: Never.self) { try apple.verify(jws) }
        #expect(throws: SignedPayloadError.self) { try appleLibrary.verify(jws) }
    }

    @Test func aDidRenewWithoutATopLevelSignedDateIsCheckedAtItsTransactionsSigningDate() throws {
        let payload = try apple.verify(try signedPayload(ofBody: "notification_v2_did_renew_sandbox_body_gopay.json"))
        let notification = try AppStoreNotificationV2(jsonData: payload)
        #expect(notification.notificationType == "DID_RENEW")
        #expect(notification.environment == .sandbox)
        let transaction = try AppStoreTransactionV2(jsonData: apple.verify(try #require(notification.signedTransactionInfo)))
        let renewal = try AppStoreRenewalInfoV2(jsonData: apple.verify(try #require(notification.signedRenewalInfo)))
        #expect(transaction.transaction.originalTransactionID == renewal.renewal.originalTransactionID)
        #expect(transaction.bundleID == notification.bundleID)
    }

    @Test func aRealTestNotificationVerifiesAndCarriesNoTransaction() throws {
        let notification = try AppStoreNotificationV2(jsonData: apple.verify(try signedPayload(ofBody: "notification_v2_test_sandbox_body_imdhemy.json")))
        #expect(notification.notificationType == "TEST")
        #expect(notification.bundleID == "com.Abilities")
        #expect(notification.signedTransactionInfo == nil)
    }

    @Test func realSignedTransactionAndRenewalInfoMapToTheDomain() throws {
        let signed = try AppStoreTransactionV2(jsonData: apple.verify(text("jws_transaction_autorenew_intro_offer_sandbox_gopay.jws")))
        let transaction = signed.transaction
        #expect(transaction.transactionID == "2000000184445477")
        #expect(transaction.originalTransactionID == "2000000184445477")
        #expect(transaction.productID == "Com.VoiceRecording.Telephone.103")
        #expect(transaction.purchaseDate == Date(timeIntervalSince1970: 1_666_615_873))
        #expect(transaction.expiresDate == Date(timeIntervalSince1970: 1_666_615_993))
        #expect(transaction.isInIntroOfferPeriod)
        #expect(transaction.appAccountToken == "207262da-1ac8-4e0a-a399-5aa62a82800f")
        #expect(transaction.webOrderLineItemID == "2000000013429558")
        #expect(signed.environment == .sandbox)
        #expect(signed.bundleID == "Com.VoiceRecording.Telephone")
        #expect(signed.productType == "Auto-Renewable Subscription")

        let renewal = try AppStoreRenewalInfoV2(jsonData: apple.verify(text("jws_renewalinfo_autorenew_off_voluntary_sandbox_gopay.jws"))).renewal
        #expect(renewal == RenewalInfo(originalTransactionID: "2000000184445477", productID: "Com.VoiceRecording.Telephone.103",
                                       autoRenewProductID: "Com.VoiceRecording.Telephone.103", willRenew: false, expirationIntent: 1,
                                       signedDate: renewal.signedDate))
    }

    @Test(arguments: ["mock_jws_notification_test_applelib.jws", "mock_jws_transaction_applelib.jws", "mock_jws_renewalinfo_applelib.jws",
                      "mock_jws_notification_wrong_bundle_applelib.jws"])
    func appleLibraryMocksVerifyAgainstItsTestRootOnly(_ name: String) throws {
        let jws = try text(name)
        #expect(throws: Never.self) { try appleLibrary.verify(jws) }
        #expect(throws: SignedPayloadError.self) { try apple.verify(jws) }
    }

    @Test func theAppleLibraryTestNotificationDecodes() throws {
        let notification = try AppStoreNotificationV2(jsonData: appleLibrary.verify(text("mock_jws_notification_test_applelib.jws")))
        #expect(notification.notificationType == "TEST")
        #expect(notification.bundleID == "com.example")
        #expect(notification.environment == .sandbox)
        #expect(notification.notificationUUID == "9ad56bd2-0bc6-42e0-af24-fd996d87a1e6")
        let wrong = try AppStoreNotificationV2(jsonData: appleLibrary.verify(text("mock_jws_notification_wrong_bundle_applelib.jws")))
        #expect(wrong.bundleID == "com.example.wrong")
    }

    @Test(arguments: [
        ("negative_notification_v2_test_x5c_tampered_mimo.jws", "x5c[0] is not signed by x5c[1]"),
        ("mock_jws_notification_missing_x5c_applelib.jws", "x5c holds 0 certificate(s), expected at least 2"),
        ("xcode_jws_transaction_autorenew_applelib.jws", "x5c holds 1 certificate(s), expected at least 2"),
    ])
    func tamperedOrIncompleteChainsAreRefused(_ name: String, _ reason: String) throws {
        let jws = try text(name)
        for verifier in [apple, appleLibrary] {
            #expect(throws: SignedPayloadError(reason)) { try verifier.verify(jws) }
        }
    }

    @Test func theTamperedNotificationsSignatureCannotVerifyEither() throws {
        // Its x5c[0] is the WWDR G6 intermediate, whose P-384 key cannot check an ES256 signature at all.
        let jws = try CompactJWS(text("negative_notification_v2_test_x5c_tampered_mimo.jws"))
        #expect(jws.certificateChain[0] == Array(try Fixtures.data("cert_apple_wwdr_g6.cer")))
        #expect(P256.Signing.PublicKey(try Certificate(derEncoded: jws.certificateChain[0]).publicKey) == nil)
    }

    @Test func aPayloadNotSignedAsClaimedIsRefused() throws {
        let chain = try TestSigningChain()
        let verifier = SignedPayloadVerifier(roots: [chain.root])
        let good = try chain.sign(["notificationType": "TEST", "signedDate": Date().timeIntervalSince1970 * 1000])
        #expect(throws: Never.self) { try verifier.verify(good) }
        var parts = good.split(separator: ".").map(String.init)
        parts[1] = try TestSigningChain().sign(["notificationType": "REFUND"]).split(separator: ".").map(String.init)[1]
        #expect(throws: SignedPayloadError("the ES256 signature does not verify with the leaf's key")) { try verifier.verify(parts.joined(separator: ".")) }
        #expect(throws: SignedPayloadError("x5c[1] is not signed by a trusted root")) { try SignedPayloadVerifier(roots: [AppleRootCertificate.g3]).verify(good) }
        let expired = try chain.sign(["notificationType": "TEST", "signedDate": 1_000_000_000_000])
        #expect(throws: SignedPayloadError("x5c[0] is not valid at the signing date 2001-09-09T01:46:40Z")) { try verifier.verify(expired) }
    }
}

/// The decoded (already verified) V2 payloads of Apple's library tests, mapped into the domain.
@Suite struct AppStoreV2DecodingTests {
    @Test func aRevokedTransactionMapsToACancellation() throws {
        for name in ["decoded_transaction_applelib.json", "decoded_transaction_revoked_prorated_refund_applelib.json"] {
            let signed = try AppStoreTransactionV2(jsonData: Fixtures.data(name))
            #expect(signed.transaction == StoreTransaction(
                transactionID: "23456", originalTransactionID: "12345", productID: "com.example.product",
                purchaseDate: Date(timeIntervalSince1970: 1_698_148_900), originalPurchaseDate: Date(timeIntervalSince1970: 1_698_148_800),
                expiresDate: Date(timeIntervalSince1970: 1_698_149_000), cancellationDate: Date(timeIntervalSince1970: 1_698_148_950),
                cancellationReason: "1", isUpgraded: true, isInIntroOfferPeriod: true, webOrderLineItemID: "34343",
                subscriptionGroupIdentifier: "55555", appAccountToken: "7e3fb20b-4cdb-47cc-936d-99d65f608138",
                signedDate: Date(timeIntervalSince1970: 1_698_148_900)), "\(name)")
            #expect(signed.bundleID == "com.example")
            #expect(signed.environment == nil, "LocalTesting is neither production nor sandbox")
        }
    }

    @Test func billingRetryRenewalInfoMapsToTheDomain() throws {
        let renewal = try AppStoreRenewalInfoV2(jsonData: Fixtures.data("decoded_renewalinfo_billing_retry_applelib.json")).renewal
        #expect(renewal == RenewalInfo(
            originalTransactionID: "12345", productID: "com.example.product", autoRenewProductID: "com.example.product.2",
            willRenew: true, expirationIntent: 1, isInBillingRetryPeriod: true,
            gracePeriodExpiresDate: Date(timeIntervalSince1970: 1_698_148_900), priceConsentStatus: 0,
            signedDate: Date(timeIntervalSince1970: 1_698_148_800)))
    }

    @Test func notificationsDecodeTheirTypeAndData() throws {
        let subscribed = try AppStoreNotificationV2(jsonData: Fixtures.data("decoded_notification_v2_subscribed_initial_buy_applelib.json"))
        #expect(subscribed.notificationType == "SUBSCRIBED")
        #expect(subscribed.subtype == "INITIAL_BUY")
        #expect(subscribed.notificationUUID == "002e14d5-51f5-4503-b5a8-c3a1af68eb20")
        #expect(subscribed.bundleID == "com.example")
        #expect(subscribed.signedTransactionInfo == "signed_transaction_info_value")
        #expect(subscribed.signedRenewalInfo == "signed_renewal_info_value")
        let consumption = try AppStoreNotificationV2(jsonData: Fixtures.data("decoded_notification_v2_consumption_request_applelib.json"))
        #expect(consumption.notificationType == "CONSUMPTION_REQUEST")
        let summary = try AppStoreNotificationV2(jsonData: Fixtures.data("decoded_notification_v2_renewal_extension_summary_applelib.json"))
        #expect(summary.subtype == "SUMMARY")
        #expect(summary.bundleID == "com.example" && summary.signedTransactionInfo == nil)
    }

    @Test func anUndecodablePayloadNamesItsField() {
        #expect(throws: AppStoreDecodingError.self) { try AppStoreNotificationV2(jsonData: Data(#"{"data": {}}"#.utf8)) }
        do {
            _ = try AppStoreTransactionV2(jsonData: Data(#"{"transactionId": "1", "productId": "p"}"#.utf8))
            Issue.record("a transaction without purchaseDate decoded")
        } catch {
            #expect(error.path == "purchaseDate")
        }
    }
}
