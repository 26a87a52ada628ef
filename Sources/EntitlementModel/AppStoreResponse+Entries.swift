import Foundation

/// One transaction entry of `in_app`, `latest_receipt_info`, `latest_expired_receipt_info`, or an iOS 6 flat
/// receipt, decoded into the domain's `StoreTransaction`.
struct ReceiptEntry: Decodable {
    var transaction: StoreTransaction

    private enum CodingKeys: String, CodingKey {
        case transactionID = "transaction_id"
        case originalTransactionID = "original_transaction_id"
        case productID = "product_id"
        case purchaseDateMs = "purchase_date_ms", purchaseDate = "purchase_date"
        case originalPurchaseDateMs = "original_purchase_date_ms", originalPurchaseDate = "original_purchase_date"
        case expiresDateMs = "expires_date_ms", expiresDate = "expires_date"
        case expiresDateFormatted = "expires_date_formatted"
        case cancellationDateMs = "cancellation_date_ms", cancellationDate = "cancellation_date"
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

    init(from decoder: any Decoder) throws {
        let entry = try decoder.container(keyedBy: CodingKeys.self)
        let transactionID = try entry.appleRequiredString(.transactionID)
        guard let purchaseDate = try entry.appleDate(ms: .purchaseDateMs, text: .purchaseDate) else {
            throw DecodingError.keyNotFound(
                CodingKeys.purchaseDateMs,
                .init(codingPath: entry.codingPath, debugDescription: "a transaction needs purchase_date(_ms)")
            )
        }
        transaction = StoreTransaction(
            transactionID: transactionID,
            originalTransactionID: try entry.appleString(.originalTransactionID) ?? transactionID,
            productID: try entry.appleRequiredString(.productID),
            purchaseDate: purchaseDate,
            originalPurchaseDate: try entry.appleDate(ms: .originalPurchaseDateMs, text: .originalPurchaseDate),
            expiresDate: try entry.appleDate(ms: .expiresDateMs, text: .expiresDate, .expiresDateFormatted),
            cancellationDate: try entry.appleDate(ms: .cancellationDateMs, text: .cancellationDate),
            cancellationReason: try entry.appleString(.cancellationReason),
            isUpgraded: try entry.appleBool(.isUpgraded) ?? false,
            isTrialPeriod: try entry.appleBool(.isTrialPeriod) ?? false,
            isInIntroOfferPeriod: try entry.appleBool(.isInIntroOfferPeriod) ?? false,
            ownership: try entry.appleString(.ownershipType)?.uppercased() == "FAMILY_SHARED" ? .familyShared : .purchased,
            quantity: try entry.appleInt(.quantity) ?? 1,
            webOrderLineItemID: try entry.appleString(.webOrderLineItemID),
            subscriptionGroupIdentifier: try entry.appleString(.subscriptionGroupIdentifier),
            appAccountToken: try entry.appleString(.appAccountToken),
            promotionalOfferID: try entry.appleString(.promotionalOfferID)
        )
    }
}

/// One `pending_renewal_info` entry as Apple sent it; `original_transaction_id` is missing in some old answers.
struct PendingRenewalEntry: Decodable, Sendable, Hashable {
    var originalTransactionID: String?
    var productID: String?
    var renewal: RenewalFields

    private enum CodingKeys: String, CodingKey {
        case originalTransactionID = "original_transaction_id"
        case productID = "product_id"
    }

    init(from decoder: any Decoder) throws {
        let entry = try decoder.container(keyedBy: CodingKeys.self)
        originalTransactionID = try entry.appleString(.originalTransactionID)
        productID = try entry.appleString(.productID)
        renewal = try RenewalFields(from: decoder)
    }
}

/// The renewal fields shared by `pending_renewal_info` entries and the top level of iOS 6 answers and V1
/// notifications.
struct RenewalFields: Decodable, Sendable, Hashable {
    var autoRenewStatus: Bool?
    var autoRenewProductID: String?
    var expirationIntent: Int?
    var isInBillingRetryPeriod: Bool?
    var gracePeriodExpiresDate: Date?
    var priceConsentStatus: Int?

    /// True when no renewal field was present at all.
    var isEmpty: Bool { self == RenewalFields() }

    private enum CodingKeys: String, CodingKey {
        case autoRenewStatus = "auto_renew_status"
        case autoRenewProductID = "auto_renew_product_id"
        case expirationIntent = "expiration_intent"
        case isInBillingRetryPeriod = "is_in_billing_retry_period"
        case gracePeriodExpiresDateMs = "grace_period_expires_date_ms"
        case gracePeriodExpiresDate = "grace_period_expires_date"
        case priceConsentStatus = "price_consent_status"
    }

    init() {}

    init(from decoder: any Decoder) throws {
        let fields = try decoder.container(keyedBy: CodingKeys.self)
        autoRenewStatus = try fields.appleBool(.autoRenewStatus)
        autoRenewProductID = try fields.appleString(.autoRenewProductID)
        expirationIntent = try fields.appleInt(.expirationIntent)
        isInBillingRetryPeriod = try fields.appleBool(.isInBillingRetryPeriod)
        gracePeriodExpiresDate = try fields.appleDate(ms: .gracePeriodExpiresDateMs, text: .gracePeriodExpiresDate)
        priceConsentStatus = try fields.appleInt(.priceConsentStatus)
    }

    /// The domain's view of these fields for one subscription.
    func renewalInfo(originalTransactionID: String, productID: String) -> RenewalInfo {
        RenewalInfo(
            originalTransactionID: originalTransactionID,
            productID: productID,
            autoRenewProductID: autoRenewProductID,
            willRenew: autoRenewStatus ?? false,
            expirationIntent: expirationIntent,
            isInBillingRetryPeriod: isInBillingRetryPeriod ?? false,
            gracePeriodExpiresDate: gracePeriodExpiresDate,
            priceConsentStatus: priceConsentStatus
        )
    }
}
