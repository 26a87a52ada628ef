import Foundation
import Testing
import X509
import EntitlementModel
@testable import FakeAppStore
import Timestamps

/// The receipt samples' bytes (their files hold base64).
private func receiptBytes(_ name: String) throws -> [UInt8] {
    let text = String(decoding: try Fixtures.data(name), as: UTF8.self)
    return Array(try #require(Data(base64Encoded: text, options: .ignoreUnknownCharacters), "\(name) is not base64"))
}

private func appReceipt(_ name: String) throws -> AppReceipt {
    guard case .app(let receipt) = try LocalReceipt(try receiptBytes(name)) else { throw ReceiptDecodingError("\(name) is not an app receipt") }
    return receipt
}

private func date(_ text: String) throws -> Date { try #require(RFC3339.date(from: text)) }

/// Every receipt of the shared samples read locally (`LocalReceipt`: PKCS#7 app receipts and iOS 6 transaction
/// receipts), checked against what Apple answered for the same receipts, against Apple's own `ReceiptUtility`,
/// and against broken copies; the certificates they carry chained to the shared Apple certificates.
@Suite struct LocalReceiptTests {
    @Test func everyReceiptSampleReadsAsItsKind() throws {
        let names = Fixtures.names(prefix: "receipt_", suffix: ".b64")
        #expect(names.count >= 9, "samples missing from \(Fixtures.directory.path)")
        for name in names {
            switch try LocalReceipt(try receiptBytes(name)) {
            case .app(let receipt):
                #expect(!name.contains("ios6"), "\(name)")
                #expect(!receipt.bundleID.isEmpty && receipt.creationDate != nil, "\(name)")
                for purchase in receipt.inApp {
                    #expect(!purchase.productID.isEmpty && !purchase.transactionID.isEmpty && purchase.purchaseDate != nil, "\(name)")
                }
            case .transaction(let receipt):
                #expect(name.contains("ios6"), "\(name)")
                #expect(receipt.environment == "Sandbox" && receipt.quantity == 1 && receipt.purchaseDate != nil, "\(name)")
            }
        }
    }

    @Test func appReceiptsSayWhatTheirProvenanceDescribes() throws {
        let expected: [(name: String, type: String, bundle: String, purchases: Int, products: Int)] = [
            ("receipt_production_autorenew_2024_tpinappreceipt.b64", "Production", "org.getpure.pure-iphone", 4, 2),
            ("receipt_sandbox_autorenew_monthly_to_annual_revenuecat.b64", "ProductionSandbox", "com.revenuecat.sampleapp", 9, 2),
            ("receipt_sandbox_g5_autorenew_2025_tpinappreceipt.b64", "ProductionSandbox", "dev.bonzer.weeka.app", 2, 1),
            ("receipt_sandbox_sha1_187inapp_2020_tpinappreceipt.b64", "ProductionSandbox", "com.nutcall.alert", 187, 3),
            ("receipt_xcode_2020_tpinappreceipt.b64", "Xcode", "net.zachariadis.cyclemaps", 1, 1),
            ("receipt_xcode_autorenew_applelib.b64", "Xcode", "com.example.naturelab.backyardbirds.example", 1, 1),
            ("receipt_xcode_empty_applelib.b64", "Xcode", "com.example.naturelab.backyardbirds.example", 0, 0),
        ]
        for sample in expected {
            let receipt = try appReceipt(sample.name)
            #expect(receipt.receiptType == sample.type, "\(sample.name)")
            #expect(receipt.bundleID == sample.bundle, "\(sample.name)")
            #expect(receipt.inApp.count == sample.purchases, "\(sample.name)")
            #expect(Set(receipt.inApp.map(\.productID)).count == sample.products, "\(sample.name)")
        }
        // The 2024 Production receipt: weekly, then monthly, all expired by the receipt's date.
        let production = try appReceipt("receipt_production_autorenew_2024_tpinappreceipt.b64")
        #expect(production.creationDate == (try date("2024-02-23T17:27:16Z")))
        #expect(production.originalPurchaseDate == (try date("2016-08-16T15:15:43Z")))
        #expect(production.applicationVersion == "15741" && production.originalApplicationVersion == "434")
        #expect(production.inApp.allSatisfy { $0.expiresDate.map { $0 < production.creationDate! } == true })
        #expect(production.inApp.contains { $0.promotionalOfferID != nil })
    }

    @Test func xcodeReceiptsReadWithTheirIndefiniteLengthsAndOffsets() throws {
        let autorenew = try appReceipt("receipt_xcode_autorenew_applelib.b64")
        let purchase = try #require(autorenew.inApp.first)
        #expect(purchase.productID == "pass.premium" && purchase.transactionID == "0" && purchase.originalTransactionID == nil)
        #expect(purchase.purchaseDate == (try date("2023-10-19T01:45:36Z")))
        #expect(purchase.expiresDate == (try date("2023-11-19T01:45:36Z")))
        #expect(purchase.isInIntroOfferPeriod == true && purchase.quantity == 1)
        #expect(autorenew.expirationDate == (try date("4001-01-01T00:00:00Z")))
        // Xcode 2020 wrote its dates with offsets lacking a colon (`+0100`).
        let xcode2020 = try appReceipt("receipt_xcode_2020_tpinappreceipt.b64")
        #expect(xcode2020.creationDate == (try date("2020-07-22T17:33:15Z")))
        #expect(xcode2020.inApp.first?.expiresDate != nil)
    }

    /// SOURCES.md: the RevenueCat receipt decodes to the same 9 transactions and creation date as the
    /// verifyReceipt answer recorded for it.
    @Test func theRevenueCatReceiptHoldsWhatVerifyReceiptAnsweredForIt() throws {
        let receipt = try appReceipt("receipt_sandbox_autorenew_monthly_to_annual_revenuecat.b64")
        let answer = try #require(try AppStoreResponse(
            jsonData: Fixtures.data("verifyreceipt_status0_autorenew_monthly_to_annual_sandbox_revenuecat.json")).receipt)
        #expect(receipt.bundleID == answer.bundleID)
        #expect(receipt.applicationVersion == answer.applicationVersion)
        #expect(receipt.originalApplicationVersion == answer.originalApplicationVersion)
        #expect(receipt.creationDate == answer.creationDate)
        #expect(receipt.receiptType == answer.receiptType)
        struct Row: Hashable { var id, original, product: String; var purchased, expires: Date?; var trial, intro: Bool? }
        let local = Set(receipt.inApp.map {
            Row(id: $0.transactionID, original: $0.originalTransactionID ?? "", product: $0.productID, purchased: $0.purchaseDate,
                expires: $0.expiresDate, trial: $0.isTrialPeriod, intro: $0.isInIntroOfferPeriod)
        })
        let apple = Set(answer.inApp.map {
            Row(id: $0.transactionID, original: $0.originalTransactionID, product: $0.productID, purchased: $0.purchaseDate,
                expires: $0.expiresDate, trial: $0.isTrialPeriod, intro: $0.isInIntroOfferPeriod)
        })
        #expect(local.count == 9)
        #expect(local == apple)
    }

    /// SOURCES.md: the MindMob transaction receipt is exactly the `receipt-data` of the captured verifyReceipt call.
    @Test func theMindMobTransactionReceiptIsTheOneAppleAnswered() throws {
        guard case .transaction(let receipt) = try LocalReceipt(try receiptBytes("receipt_ios6_transaction_sandbox_mindmob_inapppurchase.b64")) else {
            Issue.record("not read as a transaction receipt")
            return
        }
        let answer = try #require(try AppStoreResponse(
            jsonData: Fixtures.data("verifyreceipt_status0_ios6_transaction_sandbox_captured_itunesiap.json")).receipt)
        let transaction = try #require(answer.legacyTransaction)
        #expect(receipt.bundleID == answer.bundleID && receipt.bundleVersion == answer.applicationVersion)
        #expect(receipt.transactionID == transaction.transactionID && receipt.originalTransactionID == transaction.originalTransactionID)
        #expect(receipt.productID == transaction.productID && receipt.purchaseDate == transaction.purchaseDate)
        #expect(receipt.originalPurchaseDate == transaction.originalPurchaseDate)

        guard case .transaction(let consumable) = try LocalReceipt(try receiptBytes("receipt_ios6_consumable_sandbox_itunesiap.b64")) else {
            Issue.record("not read as a transaction receipt")
            return
        }
        #expect(consumable.productID == "BattleGold50")
    }

    /// The app receipts inside other samples: a client plugin's wrapper and a V1 notification's `latest_receipt`.
    @Test func receiptsCarriedByOtherSamplesRead() throws {
        struct Wrapper: Decodable { var productId: String; var transactionReceipt: String }
        let wrapper = try JSONDecoder().decode(Wrapper.self, from: Fixtures.data("receipt_wrapped_sandbox_consumable_and_subs_laraveliap.json"))
        let wrapped = try AppReceipt(ber: Array(try #require(Data(base64Encoded: wrapper.transactionReceipt))))
        #expect(wrapped.inApp.count == 61)
        #expect(wrapped.inApp.contains { $0.productID == wrapper.productId })

        let notification = try AppStoreNotificationV1(jsonData: Fixtures.data("notification_v1_did_change_renewal_status_sandbox_laraveliap.json"))
        let latestReceipt = try #require(notification.latestReceipt)
        let latest = try AppReceipt(ber: Array(try #require(Data(base64Encoded: latestReceipt))))
        #expect(latest.receiptType == "ProductionSandbox" && !latest.inApp.isEmpty)
    }

    // MARK: Certificates

    /// Production and Sandbox receipts chain to Apple Root CA (`cert_apple_inc_root_ca.cer`), Xcode's to the
    /// StoreKit test certificate (`cert_storekit_xcode_test_receipts.cer`, which Xcode's receipts carry alone):
    /// every other certificate a receipt carries is signed by another it carries.
    @Test func theCertificatesReceiptsCarryChainToTheSharedRoots() throws {
        let appleRoot = try Certificate(derEncoded: Array(Fixtures.data("cert_apple_inc_root_ca.cer")))
        let storeKit = try Certificate(derEncoded: Array(Fixtures.data("cert_storekit_xcode_test_receipts.cer")))
        #expect(appleRoot.subject == appleRoot.issuer && appleRoot.publicKey.isValidSignature(appleRoot.signature, for: appleRoot))
        #expect(storeKit.subject == storeKit.issuer && storeKit.publicKey.isValidSignature(storeKit.signature, for: storeKit))
        for name in Fixtures.names(prefix: "receipt_", suffix: ".b64") where !name.contains("ios6") {
            let receipt = try appReceipt(name)
            let root = receipt.receiptType == "Xcode" ? storeKit : appleRoot
            let carried = try receipt.certificates.map { try Certificate(derEncoded: $0) }
            if receipt.receiptType == "Xcode" {
                #expect(carried == [storeKit], "\(name): Xcode signs with the StoreKit certificate alone")
                continue
            }
            #expect(carried.count == 3 && carried.contains(root), "\(name): a signer, its WWDR intermediate and the root itself")
            // The carried certificates in any order: each but the root is issued by another carried one.
            for certificate in carried where certificate != root {
                let issuer = try #require(([root] + carried).first { $0.subject == certificate.issuer }, "\(name): no issuer for \(certificate.subject)")
                #expect(issuer.publicKey.isValidSignature(certificate.signature, for: certificate), "\(name): \(certificate.subject)")
            }
        }
    }

    /// The WWDR G6 intermediate of the shared samples is the one real signed payloads carry, signed by Apple Root CA - G3.
    @Test func theWWDRG6IntermediateIsTheOneSignedPayloadsCarry() throws {
        let g6 = Array(try Fixtures.data("cert_apple_wwdr_g6.cer"))
        let g3 = try Certificate(derEncoded: Array(Fixtures.data("cert_apple_root_ca_g3.cer")))
        let intermediate = try Certificate(derEncoded: g6)
        #expect(intermediate.issuer == g3.subject && g3.publicKey.isValidSignature(intermediate.signature, for: intermediate))
        let jws = try CompactJWS(String(decoding: try Fixtures.data("jws_transaction_autorenew_renewal_sandbox_gopay.jws"), as: UTF8.self)
            .trimmingCharacters(in: .whitespacesAndNewlines))
        #expect(jws.certificateChain.count == 3 && jws.certificateChain[1] == g6)
    }

    // MARK: Broken input

    /// Truncated, bit-flipped and pathological copies either read or throw; none traps (the decoder runs on
    /// whatever a client posts).
    @Test func brokenReceiptsThrowAndNeverTrap() throws {
        var generator = SplitMix64(seed: 0x5EED_2026)
        for name in Fixtures.names(prefix: "receipt_", suffix: ".b64") {
            let bytes = try receiptBytes(name)
            for _ in 0..<40 {
                let cut = Int(generator.next() % UInt64(bytes.count))
                #expect(throws: ReceiptDecodingError.self, "\(name) cut at \(cut)") { try LocalReceipt(Array(bytes[..<cut])) }
            }
            for _ in 0..<200 {
                var flipped = bytes
                let position = Int(generator.next() % UInt64(bytes.count))
                flipped[position] ^= UInt8(truncatingIfNeeded: generator.next() | 1)
                _ = try? LocalReceipt(flipped)
            }
        }
        let nested = (0..<200_000).map { $0 % 2 == 0 ? UInt8(0x30) : 0x80 }
        #expect(throws: ReceiptDecodingError.self) { try LocalReceipt(nested) }
        #expect(throws: ReceiptDecodingError.self) { try LocalReceipt([0x30, 0x84, 0xff, 0xff, 0xff, 0xff, 0x06]) }
        #expect(throws: ReceiptDecodingError.self) { try LocalReceipt([0x30, 0x89, 1, 1, 1, 1, 1, 1, 1, 1, 1]) }
        #expect(throws: ReceiptDecodingError.self) { try LocalReceipt(Array(#"{"fake": {"bundle_id": "com.example.app"}}"#.utf8)) }
        #expect(throws: ReceiptDecodingError.self) { try LocalReceipt([]) }
    }

    // MARK: Apple's ReceiptUtility

    /// One receipt case of the parity harness's cases.json (`receipts`).
    struct ReceiptCase: Decodable {
        var name: String
        var kind: String
        var receiptData: String
        var appleTransactionID: String?
        var appleError: String?

        private enum CodingKeys: String, CodingKey {
            case name, kind, receiptData = "receipt_data", appleTransactionID = "apple_transaction_id", appleError = "apple_error"
        }
    }

    /// What Apple's `ReceiptUtility` (app-store-server-library, Python) extracts, we read: where it finds a
    /// transaction id, ours holds it as the first purchase's transaction or original transaction id (Apple takes
    /// whichever of the two comes first); where it finds none in an app receipt, ours holds no purchase; where it
    /// refuses the receipt, or finds no purchase in a transaction receipt, ours throws.
    @Test func whatApplesReceiptUtilityExtractsWeRead() throws {
        guard let path = ProcessInfo.processInfo.environment["SIGNED_PARITY_CASES"], !path.isEmpty else {
            throw SignedDataParityTests.ParityCasesMissing()
        }
        struct File: Decodable { var receipts: [ReceiptCase] }
        let cases = try JSONDecoder().decode(File.self, from: Data(contentsOf: URL(fileURLWithPath: path))).receipts
        try #require(cases.count >= 20, "only \(cases.count) receipt cases in \(path)")
        for entry in cases {
            let bytes = Array(try #require(Data(base64Encoded: entry.receiptData)))
            let local = Result { () throws(ReceiptDecodingError) in try LocalReceipt(bytes) }
            switch (local, entry.appleTransactionID) {
            case (.success(.app(let receipt)), let id?):
                let first = try #require(receipt.inApp.first, "\(entry.name)")
                #expect(id == first.transactionID || id == first.originalTransactionID, "\(entry.name)")
            case (.success(.app(let receipt)), nil):
                #expect(entry.appleError == nil && receipt.inApp.isEmpty, "\(entry.name)")
            case (.success(.transaction(let receipt)), let id):
                #expect(id == receipt.transactionID, "\(entry.name)")
            case (.failure(let error), let id):
                #expect(id == nil && (entry.appleError != nil || entry.kind == "transaction"), "\(entry.name): we refuse it (\(error))")
            }
        }
    }

    // MARK: Refusing early

    @Test func aReceiptOfAnotherAppIsRefusedBeforeAppleIsAsked() throws {
        let revenueCat = try receiptBytes("receipt_sandbox_autorenew_monthly_to_annual_revenuecat.b64")
        let mindMob = try receiptBytes("receipt_ios6_transaction_sandbox_mindmob_inapppurchase.b64")
        #expect(LocalReceipt.rejection(revenueCat, expectedBundleID: "com.example.app") == "receipt is for com.revenuecat.sampleapp, not com.example.app")
        #expect(LocalReceipt.rejection(mindMob, expectedBundleID: "com.example.app") == "receipt is for com.mindmobapp.MindMob, not com.example.app")
        #expect(LocalReceipt.rejection(revenueCat, expectedBundleID: "com.revenuecat.sampleapp") == nil)
        #expect(LocalReceipt.rejection(revenueCat, expectedBundleID: nil) == nil)
        // The bundle alone, as the refusal reads it, is the whole receipt's.
        for name in Fixtures.names(prefix: "receipt_", suffix: ".b64") {
            let bytes = try receiptBytes(name)
            #expect(try LocalReceipt.bundleID(of: bytes) == LocalReceipt(bytes).bundleID, "\(name)")
        }
        // What does not read here is Apple's to judge.
        #expect(LocalReceipt.rejection(Array("garbage".utf8), expectedBundleID: "com.example.app") == nil)
        #expect(LocalReceipt.rejection(Array(#"{"fake": {}}"#.utf8), expectedBundleID: "com.example.app") == nil)
    }
}
