import ServiceRuntime
import EntitlementModel
import Foundation

/// A synthetic App Store receipt the fake App Store verifies: what a test (or a demo) wants Apple to say
/// about a purchase, carried in the receipt data itself.
///
/// Its receipt data is the base64 of `{"fake": {...}}`, where the object holds `bundle_id`, `environment`
/// (`Production` or `Sandbox`), optional `application_version` and `original_application_version`, and the
/// lists `in_app`, `latest_receipt_info` and `pending_renewal_info` in Apple's field names, with dates as
/// integer milliseconds (`purchase_date_ms`, `expires_date_ms`, `cancellation_date_ms`,
/// `original_purchase_date_ms`, `grace_period_expires_date_ms`) and flags as JSON booleans. For example:
///
///     {"fake": {"bundle_id": "com.example.app", "environment": "Production",
///               "in_app": [{"transaction_id": "1001", "product_id": "com.example.lifetime",
///                           "purchase_date_ms": 1767225600000}]}}
///
/// The fake answers it with status `0` and a verifyReceipt body in Apple's shape from the endpoint of its
/// environment, `21007` from production for a sandbox receipt and `21008` from sandbox for a production one.
/// The builders in `FakeReceipt+Builders.swift` make receipts for every product type.
public struct FakeReceipt: Sendable, Hashable {
    /// The receipt's `bundle_id` (default `com.example.app`); a service expecting another app rejects the receipt.
    public var bundleID: String
    /// Which endpoint answers status 0; the other answers `21007` (production, for a sandbox receipt) or `21008`.
    public var environment: StoreEnvironment
    /// The receipt's `application_version`; `1` by default and when the receipt data omits it.
    public var applicationVersion: String
    /// The receipt's `original_application_version`; `1.0` by default and when the receipt data omits it.
    public var originalApplicationVersion: String
    /// The transactions of the receipt itself (Apple leaves finished consumables out).
    public var inApp: [StoreTransaction]
    /// Every transaction of the receipt's auto-renewable subscriptions, renewals included.
    public var latestReceiptInfo: [StoreTransaction]
    /// The renewal state of each subscription.
    public var pendingRenewalInfo: [RenewalInfo]

    /// A receipt with these values; the defaults make an empty Production receipt of `com.example.app`.
    public init(
        bundleID: String = "com.example.app", environment: StoreEnvironment = .production,
        applicationVersion: String = "1", originalApplicationVersion: String = "1.0",
        inApp: [StoreTransaction] = [], latestReceiptInfo: [StoreTransaction] = [], pendingRenewalInfo: [RenewalInfo] = []
    ) {
        self.bundleID = bundleID
        self.environment = environment
        self.applicationVersion = applicationVersion
        self.originalApplicationVersion = originalApplicationVersion
        self.inApp = inApp
        self.latestReceiptInfo = latestReceiptInfo
        self.pendingRenewalInfo = pendingRenewalInfo
    }

    /// The receipt data to post: base64 of `{"fake": {...}}`.
    public var receiptData: String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        // Encoding plain strings, integers and booleans cannot fail.
        let json = try! encoder.encode(["fake": Payload(self)])
        return json.base64EncodedString()
    }

    /// Reads the receipt back from receipt data; nil when it is not a fake receipt's base64 (a real receipt,
    /// garbage, or a `{"fake": ...}` object that lacks a required field).
    public init?(receiptData: String) {
        guard let data = Data(base64Encoded: receiptData, options: .ignoreUnknownCharacters),
              data.first == UInt8(ascii: "{"),
              let wrapper = try? JSONDecoder().decode([String: Payload].self, from: data),
              wrapper.count == 1, let payload = wrapper["fake"]
        else { return nil }
        self = payload.receipt
    }
}

extension Date {
    /// This instant truncated to whole milliseconds, the precision verifyReceipt bodies carry.
    var wholeMilliseconds: Date {
        Date(timeIntervalSince1970: (timeIntervalSince1970 * 1_000).rounded(.down) / 1_000)
    }

    /// Milliseconds since 1970, as Apple writes them.
    var milliseconds: Int64 { Int64((timeIntervalSince1970 * 1_000).rounded(.down)) }

    init(milliseconds: Int64) {
        self.init(timeIntervalSince1970: Double(milliseconds) / 1_000)
    }
}

/// The JSON form of a fake receipt inside its receipt data.
private struct Payload: Codable {
    var bundleID: String
    var environment: StoreEnvironment
    var applicationVersion: String?
    var originalApplicationVersion: String?
    var inApp: [TransactionPayload]?
    var latestReceiptInfo: [TransactionPayload]?
    var pendingRenewalInfo: [RenewalPayload]?

    enum CodingKeys: String, CodingKey {
        case bundleID = "bundle_id", environment
        case applicationVersion = "application_version"
        case originalApplicationVersion = "original_application_version"
        case inApp = "in_app"
        case latestReceiptInfo = "latest_receipt_info"
        case pendingRenewalInfo = "pending_renewal_info"
    }

    init(_ receipt: FakeReceipt) {
        bundleID = receipt.bundleID
        environment = receipt.environment
        applicationVersion = receipt.applicationVersion
        originalApplicationVersion = receipt.originalApplicationVersion
        inApp = receipt.inApp.map(TransactionPayload.init)
        latestReceiptInfo = receipt.latestReceiptInfo.isEmpty ? nil : receipt.latestReceiptInfo.map(TransactionPayload.init)
        pendingRenewalInfo = receipt.pendingRenewalInfo.isEmpty ? nil : receipt.pendingRenewalInfo.map(RenewalPayload.init)
    }

    var receipt: FakeReceipt {
        FakeReceipt(
            bundleID: bundleID, environment: environment,
            applicationVersion: applicationVersion ?? "1", originalApplicationVersion: originalApplicationVersion ?? "1.0",
            inApp: (inApp ?? []).map(\.transaction), latestReceiptInfo: (latestReceiptInfo ?? []).map(\.transaction),
            pendingRenewalInfo: (pendingRenewalInfo ?? []).map(\.renewal))
    }
}

private struct TransactionPayload: Codable {
    var transactionID: String
    var originalTransactionID: String?
    var productID: String
    var purchaseDateMs: Int64
    var originalPurchaseDateMs: Int64?
    var expiresDateMs: Int64?
    var cancellationDateMs: Int64?
    var cancellationReason: String?
    var isUpgraded: Bool?
    var isTrialPeriod: Bool?
    var isInIntroOfferPeriod: Bool?
    var ownershipType: String?
    var quantity: Int?
    var webOrderLineItemID: String?
    var subscriptionGroupIdentifier: String?
    var appAccountToken: String?
    var promotionalOfferID: String?

    enum CodingKeys: String, CodingKey {
        case transactionID = "transaction_id"
        case originalTransactionID = "original_transaction_id"
        case productID = "product_id"
        case purchaseDateMs = "purchase_date_ms"
        case originalPurchaseDateMs = "original_purchase_date_ms"
        case expiresDateMs = "expires_date_ms"
        case cancellationDateMs = "cancellation_date_ms"
        case cancellationReason = "cancellation_reason"
        case isUpgraded = "is_upgraded"
        case isTrialPeriod = "is_trial_period"
        case isInIntroOfferPeriod = "is_in_intro_offer_period"
        case ownershipType = "in_app_ownership_type"
        case quantity
        case webOrderLineItemID = "web_order_line_item_id"
        case subscriptionGroupIdentifier = "subscription_group_identifier"
        case appAccountToken = "app_account_token"
        case promotionalOfferID = "promotional_offer_id"
    }

    init(_ transaction: StoreTransaction) {
        transactionID = transaction.transactionID
        originalTransactionID = transaction.originalTransactionID
        productID = transaction.productID
        purchaseDateMs = transaction.purchaseDate.milliseconds
        originalPurchaseDateMs = transaction.originalPurchaseDate?.milliseconds
        expiresDateMs = transaction.expiresDate?.milliseconds
        cancellationDateMs = transaction.cancellationDate?.milliseconds
        cancellationReason = transaction.cancellationReason
        isUpgraded = transaction.isUpgraded ? true : nil
        isTrialPeriod = transaction.isTrialPeriod
        isInIntroOfferPeriod = transaction.isInIntroOfferPeriod
        ownershipType = transaction.ownership == .familyShared ? "FAMILY_SHARED" : "PURCHASED"
        quantity = transaction.quantity
        webOrderLineItemID = transaction.webOrderLineItemID
        subscriptionGroupIdentifier = transaction.subscriptionGroupIdentifier
        appAccountToken = transaction.appAccountToken
        promotionalOfferID = transaction.promotionalOfferID
    }

    var transaction: StoreTransaction {
        StoreTransaction(
            transactionID: transactionID, originalTransactionID: originalTransactionID ?? transactionID,
            productID: productID, purchaseDate: Date(milliseconds: purchaseDateMs),
            originalPurchaseDate: originalPurchaseDateMs.map(Date.init(milliseconds:)),
            expiresDate: expiresDateMs.map(Date.init(milliseconds:)),
            cancellationDate: cancellationDateMs.map(Date.init(milliseconds:)),
            cancellationReason: cancellationReason, isUpgraded: isUpgraded ?? false,
            isTrialPeriod: isTrialPeriod ?? false, isInIntroOfferPeriod: isInIntroOfferPeriod ?? false,
            ownership: ownershipType?.uppercased() == "FAMILY_SHARED" ? .familyShared : .purchased,
            quantity: quantity ?? 1, webOrderLineItemID: webOrderLineItemID,
            subscriptionGroupIdentifier: subscriptionGroupIdentifier, appAccountToken: appAccountToken,
            promotionalOfferID: promotionalOfferID)
    }
}

private struct RenewalPayload: Codable {
    var originalTransactionID: String
    var productID: String
    var autoRenewProductID: String?
    var autoRenewStatus: Bool?
    var expirationIntent: Int?
    var isInBillingRetryPeriod: Bool?
    var gracePeriodExpiresDateMs: Int64?
    var priceConsentStatus: Int?

    enum CodingKeys: String, CodingKey {
        case originalTransactionID = "original_transaction_id"
        case productID = "product_id"
        case autoRenewProductID = "auto_renew_product_id"
        case autoRenewStatus = "auto_renew_status"
        case expirationIntent = "expiration_intent"
        case isInBillingRetryPeriod = "is_in_billing_retry_period"
        case gracePeriodExpiresDateMs = "grace_period_expires_date_ms"
        case priceConsentStatus = "price_consent_status"
    }

    init(_ renewal: RenewalInfo) {
        originalTransactionID = renewal.originalTransactionID
        productID = renewal.productID
        autoRenewProductID = renewal.autoRenewProductID
        autoRenewStatus = renewal.willRenew
        expirationIntent = renewal.expirationIntent
        isInBillingRetryPeriod = renewal.isInBillingRetryPeriod
        gracePeriodExpiresDateMs = renewal.gracePeriodExpiresDate?.milliseconds
        priceConsentStatus = renewal.priceConsentStatus
    }

    var renewal: RenewalInfo {
        RenewalInfo(
            originalTransactionID: originalTransactionID, productID: productID,
            autoRenewProductID: autoRenewProductID, willRenew: autoRenewStatus ?? false,
            expirationIntent: expirationIntent, isInBillingRetryPeriod: isInBillingRetryPeriod ?? false,
            gracePeriodExpiresDate: gracePeriodExpiresDateMs.map(Date.init(milliseconds:)),
            priceConsentStatus: priceConsentStatus)
    }
}
