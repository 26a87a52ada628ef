import EntitlementModel
import Foundation
import Testing
import X509
@testable import AppStore

/// Every signed sample of the shared fixtures against `SignedDataVerifier`, configured as SOURCES.md describes
/// each, with the verdict of Apple's own library (scripts/signed-parity: same cases, same verdicts).
@Suite struct SignedPayloadTests {
    enum Kind { case transaction, renewalInfo, notification, appTransaction }
    enum Roots { case appleG3, appleLibraryTestCA }

    /// How a fixture is verified and what Apple's library says of it (nil: accepted).
    struct Expectation {
        var kind: Kind
        var roots: Roots
        var bundleID: String
        var appAppleID: Int64?
        var environment: SignedDataEnvironment
        var refusal: SignedDataError.Status?
    }

    static let expectations: [String: Expectation] = [
        "jws_renewalinfo_autorenew_off_voluntary_sandbox_gopay.jws": .init(kind: .renewalInfo, roots: .appleG3, bundleID: "Com.VoiceRecording.Telephone", environment: .sandbox),
        "jws_renewalinfo_autorenew_on_sandbox_goiap.jws": .init(kind: .renewalInfo, roots: .appleG3, bundleID: "com.example.unchecked", environment: .sandbox),
        "jws_transaction_autorenew_intro_offer_sandbox_gopay.jws": .init(kind: .transaction, roots: .appleG3, bundleID: "Com.VoiceRecording.Telephone", environment: .sandbox),
        "jws_transaction_autorenew_renewal_sandbox_gopay.jws": .init(kind: .transaction, roots: .appleG3, bundleID: "Com.VoiceRecording.Telephone", environment: .sandbox),
        "notification_v2_consumption_request_consumable_production_gopay.jws": .init(kind: .notification, roots: .appleG3, bundleID: "com.jrjj.keysns", appAppleID: 1_601_830_814, environment: .production),
        // Apple's test CA certificates have no authorityKeyIdentifier: Apple's library refuses them in its
        // strict (default) mode, and its own tests turn strict checks off.
        "mock_jws_notification_test_applelib.jws": .init(kind: .notification, roots: .appleLibraryTestCA, bundleID: "com.example", appAppleID: 1234, environment: .sandbox, refusal: .verificationFailure),
        "mock_jws_notification_wrong_bundle_applelib.jws": .init(kind: .notification, roots: .appleLibraryTestCA, bundleID: "com.example", appAppleID: 1234, environment: .sandbox, refusal: .verificationFailure),
        "mock_jws_notification_missing_x5c_applelib.jws": .init(kind: .notification, roots: .appleLibraryTestCA, bundleID: "com.example", appAppleID: 1234, environment: .sandbox, refusal: .verificationFailure),
        "mock_jws_renewalinfo_applelib.jws": .init(kind: .renewalInfo, roots: .appleLibraryTestCA, bundleID: "com.example", appAppleID: 1234, environment: .sandbox, refusal: .verificationFailure),
        "mock_jws_transaction_applelib.jws": .init(kind: .transaction, roots: .appleLibraryTestCA, bundleID: "com.example", appAppleID: 1234, environment: .sandbox, refusal: .verificationFailure),
        "negative_notification_v2_test_x5c_tampered_mimo.jws": .init(kind: .notification, roots: .appleG3, bundleID: "com.getmimo.mimo", environment: .sandbox, refusal: .verificationFailure),
        "xcode_jws_apptransaction_applelib.jws": .init(kind: .appTransaction, roots: .appleG3, bundleID: "com.example.naturelab.backyardbirds.example", environment: .xcode),
        "xcode_jws_renewalinfo_applelib.jws": .init(kind: .renewalInfo, roots: .appleG3, bundleID: "com.example.naturelab.backyardbirds.example", environment: .xcode),
        "xcode_jws_transaction_autorenew_applelib.jws": .init(kind: .transaction, roots: .appleG3, bundleID: "com.example.naturelab.backyardbirds.example", environment: .xcode),
    ]

    static let jwsFixtures: [String] = {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: Fixtures.directory.path)) ?? []
        return names.filter { $0.hasSuffix(".jws") }.sorted()
    }()

    static func text(_ name: String) throws -> String {
        String(decoding: try Fixtures.data(name), as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    static func signedPayload(ofBody name: String) throws -> String {
        let body = try JSONSerialization.jsonObject(with: Fixtures.data(name)) as? [String: Any]
        return try #require(body?["signedPayload"] as? String)
    }

    static func verifier(_ roots: Roots, bundleID: String, appAppleID: Int64? = nil, environments: Set<SignedDataEnvironment>) throws -> SignedDataVerifier {
        let root = switch roots {
        case .appleG3: AppleRootCertificate.g3
        case .appleLibraryTestCA: try Certificate(derEncoded: Array(Fixtures.data("cert_applelib_test_root_ca.der")))
        }
        return SignedDataVerifier(roots: [root], bundleID: bundleID, appAppleID: appAppleID, environments: environments)
    }

    static func verify(_ jws: String, _ kind: Kind, with verifier: SignedDataVerifier) async -> SignedDataError? {
        await refusal { () async throws(SignedDataError) in
            switch kind {
            case .transaction: _ = try await verifier.verifyTransaction(jws)
            case .renewalInfo: _ = try await verifier.verifyRenewalInfo(jws)
            case .notification: _ = try await verifier.verifyNotification(jws)
            case .appTransaction: _ = try await verifier.verifyAppTransaction(jws)
            }
        }
    }

    @Test func theFixturesAreThere() {
        #expect(Set(Self.jwsFixtures) == Set(Self.expectations.keys), "every *.jws fixture needs an expectation here")
    }

    @Test(arguments: jwsFixtures)
    func everyJWSFixtureGetsApplesVerdict(_ name: String) async throws {
        let expected = try #require(Self.expectations[name], "no expectation for \(name)")
        let verifier = try Self.verifier(expected.roots, bundleID: expected.bundleID, appAppleID: expected.appAppleID,
                                         environments: [.production, .sandbox, expected.environment])
        let error = await Self.verify(try Self.text(name), expected.kind, with: verifier)
        #expect(error?.status == expected.refusal, "\(name): \(error?.description ?? "accepted")")
        if expected.refusal == nil {
            // Real App Store payloads verify against Apple's root only; Xcode payloads only where Xcode is listed.
            let other: SignedDataVerifier = expected.environment == .xcode
                ? try Self.verifier(expected.roots, bundleID: expected.bundleID, environments: [.production, .sandbox])
                : try Self.verifier(.appleLibraryTestCA, bundleID: expected.bundleID, appAppleID: expected.appAppleID, environments: [expected.environment])
            #expect(await Self.verify(try Self.text(name), expected.kind, with: other) != nil)
        }
    }

    @Test func appleLibraryMocksFailOnTheirMissingAuthorityKeyIdentifier() async throws {
        let verifier = try Self.verifier(.appleLibraryTestCA, bundleID: "com.example", appAppleID: 1234, environments: [.sandbox])
        let error = await Self.verify(try Self.text("mock_jws_transaction_applelib.jws"), .transaction, with: verifier)
        #expect(error?.reason.contains("has no authorityKeyIdentifier") == true, "\(error?.reason ?? "accepted")")
        let missing = await Self.verify(try Self.text("mock_jws_notification_missing_x5c_applelib.jws"), .notification, with: verifier)
        #expect(missing == SignedDataError(.verificationFailure, "the JWS header has no x5c certificate chain"))
    }

    @Test func theTamperedNotificationFailsItsChain() async throws {
        // Its x5c[0] is the WWDR G6 intermediate, which WWDR G6 did not sign.
        let verifier = try Self.verifier(.appleG3, bundleID: "com.getmimo.mimo", environments: [.sandbox])
        let error = await Self.verify(try Self.text("negative_notification_v2_test_x5c_tampered_mimo.jws"), .notification, with: verifier)
        #expect(error?.status == .verificationFailure)
        #expect(error?.reason.hasPrefix("the certificate chain does not validate") == true)
    }

    @Test func aDidRenewWithoutATopLevelSignedDateIsCheckedNowAndRefusedAsApplesLibraryDoes() async throws {
        let verifier = try Self.verifier(.appleG3, bundleID: "com.audaos.audarecorder", environments: [.sandbox])
        let jws = try Self.signedPayload(ofBody: "notification_v2_did_renew_sandbox_body_gopay.json")
        let error = await Self.verify(jws, .notification, with: verifier)
        #expect(error?.status == .verificationFailure)
        #expect(error?.reason.contains("has expired") == true, "\(error?.reason ?? "accepted")")
        // The log names the certificate by subject, not by swift-certificates' kilobytes-long description.
        #expect(error?.reason.contains("Prod ECC Mac App Store and iTunes Store Receipt Signing") == true)
        #expect((error?.reason.count ?? 0) < 1_000, "\(error?.reason ?? "")")
        // Its nested transaction and renewal info carry their own signedDate and verify at it.
        let data = try #require(try JSONSerialization.jsonObject(with: Data(base64Encoded: Self.base64(jws.split(separator: ".")[1]))!) as? [String: Any])["data"] as? [String: Any]
        let transaction = try await verifier.verifyTransaction(try #require(data?["signedTransactionInfo"] as? String))
        let renewal = try await verifier.verifyRenewalInfo(try #require(data?["signedRenewalInfo"] as? String))
        #expect(transaction.payload.transaction.originalTransactionID == renewal.payload.renewal.originalTransactionID)
        #expect(transaction.payload.bundleID == "com.audaos.audarecorder")
    }

    @Test func aRealTestNotificationVerifiesAndCarriesNoTransaction() async throws {
        let verifier = try Self.verifier(.appleG3, bundleID: "com.Abilities", environments: [.sandbox])
        let notification = try await verifier.verifyNotification(try Self.signedPayload(ofBody: "notification_v2_test_sandbox_body_imdhemy.json")).payload
        #expect(notification.notificationType == "TEST")
        #expect(notification.bundleID == "com.Abilities")
        #expect(notification.signedTransactionInfo == nil)
    }

    @Test func theProductionConsumptionRequestNeedsTheAppsAppleID() async throws {
        let jws = try Self.text("notification_v2_consumption_request_consumable_production_gopay.jws")
        let verified = try await Self.verifier(.appleG3, bundleID: "com.jrjj.keysns", appAppleID: 1_601_830_814, environments: [.production])
            .verifyNotification(jws)
        #expect(verified.payload.notificationType == "CONSUMPTION_REQUEST" && verified.environment == .production)
        let other = try Self.verifier(.appleG3, bundleID: "com.jrjj.keysns", appAppleID: 1, environments: [.production])
        #expect(await Self.verify(jws, .notification, with: other)?.status == .invalidAppIdentifier)
    }

    @Test func apiResponsePayloadsWithoutAnEnvironmentAreRefusedAsApplesLibraryDoes() async throws {
        let body = try #require(try JSONSerialization.jsonObject(with: Fixtures.data("api_response_transaction_history_sandbox_omnimind.json")) as? [String: Any])
        let transactions = try #require(body["signedTransactions"] as? [String])
        let verifier = try Self.verifier(.appleG3, bundleID: "club.omnichess.ios", environments: [.sandbox])
        for jws in transactions {
            let error = await Self.verify(jws, .transaction, with: verifier)
            #expect(error == SignedDataError(.invalidEnvironment, "the payload names no environment, accepted: Sandbox"))
        }
    }

    @Test func realSignedTransactionAndRenewalInfoMapToTheDomain() async throws {
        let verifier = try Self.verifier(.appleG3, bundleID: "Com.VoiceRecording.Telephone", environments: [.sandbox])
        let signed = try await verifier.verifyTransaction(try Self.text("jws_transaction_autorenew_intro_offer_sandbox_gopay.jws"))
        let transaction = signed.payload.transaction
        #expect(transaction.transactionID == "2000000184445477")
        #expect(transaction.originalTransactionID == "2000000184445477")
        #expect(transaction.productID == "Com.VoiceRecording.Telephone.103")
        #expect(transaction.purchaseDate == Date(timeIntervalSince1970: 1_666_615_873))
        #expect(transaction.expiresDate == Date(timeIntervalSince1970: 1_666_615_993))
        #expect(transaction.isInIntroOfferPeriod)
        #expect(transaction.appAccountToken == "207262da-1ac8-4e0a-a399-5aa62a82800f")
        #expect(transaction.webOrderLineItemID == "2000000013429558")
        #expect(signed.payload.environment == .sandbox && signed.environment == .sandbox)
        #expect(signed.payload.bundleID == "Com.VoiceRecording.Telephone")
        #expect(signed.payload.productType == "Auto-Renewable Subscription")
        #expect(signed.signedDate != nil)

        let renewal = try await verifier.verifyRenewalInfo(try Self.text("jws_renewalinfo_autorenew_off_voluntary_sandbox_gopay.jws")).payload.renewal
        #expect(renewal == RenewalInfo(originalTransactionID: "2000000184445477", productID: "Com.VoiceRecording.Telephone.103",
                                       autoRenewProductID: "Com.VoiceRecording.Telephone.103", willRenew: false, expirationIntent: 1,
                                       signedDate: renewal.signedDate))
    }

    @Test func xcodePayloadsDecodeWithTheirOddities() async throws {
        let bundle = "com.example.naturelab.backyardbirds.example"
        let verifier = try Self.verifier(.appleG3, bundleID: bundle, environments: [.xcode])
        let transaction = try await verifier.verifyTransaction(try Self.text("xcode_jws_transaction_autorenew_applelib.jws"))
        #expect(transaction.environment == .xcode && transaction.payload.transaction.transactionID == "0")
        let app = try await verifier.verifyAppTransaction(try Self.text("xcode_jws_apptransaction_applelib.jws")).payload
        #expect(app.bundleID == bundle && app.receiptType == "Xcode" && app.appAppleID == nil)
        #expect(app.originalPurchaseDate == Date(timeIntervalSince1970: -62_135_769_600))
    }

    static func base64(_ base64URL: Substring) -> String {
        let text = base64URL.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        return text + String(repeating: "=", count: (4 - text.count % 4) % 4)
    }
}

/// The decoded (already verified) V2 payloads of Apple's library tests, mapped into the domain.
@Suite struct AppStoreV2DecodingTests {
    @Test func aRevokedTransactionMapsToACancellation() throws {
        // The second is Apple's prorated refund (revocationPercentage 50000: half the price).
        for (name, share) in [("decoded_transaction_applelib.json", nil), ("decoded_transaction_revoked_prorated_refund_applelib.json", 50_000)] {
            let signed = try AppStoreTransactionV2(jsonData: Fixtures.data(name))
            #expect(signed.transaction == StoreTransaction(
                transactionID: "23456", originalTransactionID: "12345", productID: "com.example.product",
                purchaseDate: Date(timeIntervalSince1970: 1_698_148_900), originalPurchaseDate: Date(timeIntervalSince1970: 1_698_148_800),
                expiresDate: Date(timeIntervalSince1970: 1_698_149_000), cancellationDate: Date(timeIntervalSince1970: 1_698_148_950),
                cancellationReason: "1", isUpgraded: true, isInIntroOfferPeriod: true, webOrderLineItemID: "34343",
                subscriptionGroupIdentifier: "55555", appAccountToken: "7e3fb20b-4cdb-47cc-936d-99d65f608138",
                signedDate: Date(timeIntervalSince1970: 1_698_148_900), revocationPercentage: share), "\(name)")
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

    @Test func anAppTransactionMapsItsFields() throws {
        let app = try AppStoreAppTransaction(jsonData: Fixtures.data("decoded_app_transaction_applelib.json"))
        #expect(app.bundleID == "com.example")
        #expect(app.appAppleID == 531412)
        #expect(app.receiptType == "LocalTesting")
        #expect(app.applicationVersion == "1.2.3" && app.originalApplicationVersion == "1.1.2")
        #expect(app.receiptCreationDate == Date(timeIntervalSince1970: 1_698_148_900))
    }

    @Test func aPartialRefundCarriesItsShare() throws {
        let json = #"{"transactionId": "1", "productId": "p", "purchaseDate": 1698148900000, "revocationDate": 1698149900000, "revocationType": "REFUND_PRORATED", "revocationPercentage": 33333}"#
        #expect(try AppStoreTransactionV2(jsonData: Data(json.utf8)).transaction.revocationPercentage == 33_333)
        let odd = #"{"transactionId": "1", "productId": "p", "purchaseDate": 1698148900000, "revocationPercentage": "a third"}"#
        #expect(try AppStoreTransactionV2(jsonData: Data(odd.utf8)).transaction.revocationPercentage == nil)
    }

    /// A free trial is free whatever the offer gives it (introductory, promotional, offer code, win-back): no
    /// revenue; only an introductory offer is the intro period.
    @Test(arguments: [(1, true), (2, false), (3, false), (4, false)])
    func aFreeTrialOfAnyOfferIsATrial(offerType: Int, intro: Bool) throws {
        for (discount, trial) in [("FREE_TRIAL", true), ("PAY_AS_YOU_GO", false)] {
            let json = #"{"transactionId": "1", "productId": "p", "purchaseDate": 1698148900000, "offerType": \#(offerType), "offerDiscountType": "\#(discount)"}"#
            let transaction = try AppStoreTransactionV2(jsonData: Data(json.utf8)).transaction
            #expect(transaction.isTrialPeriod == trial && transaction.isInIntroOfferPeriod == intro, "\(offerType) \(discount)")
        }
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
