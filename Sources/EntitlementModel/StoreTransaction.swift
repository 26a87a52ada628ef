import Foundation

/// Which App Store environment answered a verification.
public enum StoreEnvironment: String, Codable, Sendable, Hashable {
    case production = "Production"
    case sandbox = "Sandbox"
}

/// The four kinds of App Store product.
public enum ProductType: String, Codable, Sendable, Hashable, CaseIterable {
    case consumable
    case nonConsumable = "non_consumable"
    case autoRenewable = "auto_renewable"
    case nonRenewing = "non_renewing"
}

/// Whether the user bought the product or receives it through Family Sharing.
public enum Ownership: String, Codable, Sendable, Hashable {
    case purchased
    case familyShared = "family_shared"
}

/// One App Store transaction as the service records it, whichever list of Apple's response it came from
/// (`in_app` or `latest_receipt_info`). Identity is `transactionID`.
public struct StoreTransaction: Codable, Sendable, Hashable {
    /// Apple's `transaction_id` (`transactionId` when signed): unique to this purchase or renewal.
    public var transactionID: String
    /// `original_transaction_id` / `originalTransactionId`: the first transaction of a subscription's chain (renewals
    /// share it); the transaction's own id when Apple omits it.
    public var originalTransactionID: String
    /// The product's App Store identifier (`product_id` / `productId`), as in the catalog.
    public var productID: String
    /// `purchase_date_ms` (or `purchase_date` text) / `purchaseDate`: when the App Store charged for this transaction
    /// (for a renewal, the renewal's own date).
    public var purchaseDate: Date
    /// `original_purchase_date_ms` / `originalPurchaseDate`: the purchase date of the original transaction; nil when
    /// Apple omits it.
    public var originalPurchaseDate: Date?
    /// Set for auto-renewable subscriptions only.
    public var expiresDate: Date?
    /// Set when Apple refunded or revoked the transaction (`cancellation_date_ms`).
    public var cancellationDate: Date?
    /// A signed transaction's `revocationPercentage`: the share of its price Apple refunded, in thousandths of a
    /// percent (0–100,000; for a quantity above 1, of the whole quantity: 1 item of 3 is about 33,333). Nil for a
    /// whole refund, or none; a value outside the range is taken for a whole refund.
    public var revocationPercentage: Int?
    /// `cancellation_reason` / `revocationReason` as Apple wrote it (`1`: an issue in the app, `0`: another reason);
    /// nil when not cancelled or Apple gave none.
    public var cancellationReason: String?
    /// True when the user upgraded to another product of the subscription group from this transaction on.
    public var isUpgraded: Bool
    /// `is_trial_period`; for a signed transaction, an offer of any type whose `offerDiscountType` is `FREE_TRIAL`.
    /// False when absent.
    public var isTrialPeriod: Bool
    /// `is_in_intro_offer_period`; for a signed transaction, `offerType` 1 (an introductory offer). False when absent.
    public var isInIntroOfferPeriod: Bool
    /// From `in_app_ownership_type` / `inAppOwnershipType`: `FAMILY_SHARED` is `.familyShared`; any other value, or
    /// none, `.purchased`.
    public var ownership: Ownership
    /// `quantity`: how many units this transaction bought (consumables); 1 when Apple omits it.
    public var quantity: Int
    /// `web_order_line_item_id` / `webOrderLineItemId`: Apple's id of a subscription purchase or renewal event across
    /// devices; nil for other products or when omitted.
    public var webOrderLineItemID: String?
    /// `subscription_group_identifier` / `subscriptionGroupIdentifier`: the App Store Connect group of an
    /// auto-renewable subscription; nil for other products. The catalog's `subscription_group` takes precedence.
    public var subscriptionGroupIdentifier: String?
    /// The `app_account_token` the app attached at purchase (a UUID string), if any.
    public var appAccountToken: String?
    /// `promotional_offer_id`; for a signed transaction, `offerIdentifier` when `offerType` is 2 (a promotional offer).
    /// Nil without a promotional offer.
    public var promotionalOfferID: String?
    /// When the App Store signed this statement of the transaction (a signed transaction's `signedDate`, or the
    /// notification's that carried it); nil for receipts, which state no date of their own. A signed statement
    /// is Apple's whole view of the transaction at that instant: a newer one may clear a refund (a reversal),
    /// an older one changes nothing.
    public var signedDate: Date?

    /// A transaction with these values; the defaults are what the decoders assume for a field Apple omits (flags
    /// false, `.purchased`, quantity 1).
    public init(
        transactionID: String, originalTransactionID: String, productID: String, purchaseDate: Date,
        originalPurchaseDate: Date? = nil, expiresDate: Date? = nil, cancellationDate: Date? = nil,
        cancellationReason: String? = nil, isUpgraded: Bool = false, isTrialPeriod: Bool = false,
        isInIntroOfferPeriod: Bool = false, ownership: Ownership = .purchased, quantity: Int = 1,
        webOrderLineItemID: String? = nil, subscriptionGroupIdentifier: String? = nil,
        appAccountToken: String? = nil, promotionalOfferID: String? = nil, signedDate: Date? = nil,
        revocationPercentage: Int? = nil
    ) {
        self.transactionID = transactionID
        self.originalTransactionID = originalTransactionID
        self.productID = productID
        self.purchaseDate = purchaseDate
        self.originalPurchaseDate = originalPurchaseDate
        self.expiresDate = expiresDate
        self.cancellationDate = cancellationDate
        self.cancellationReason = cancellationReason
        self.isUpgraded = isUpgraded
        self.isTrialPeriod = isTrialPeriod
        self.isInIntroOfferPeriod = isInIntroOfferPeriod
        self.ownership = ownership
        self.quantity = quantity
        self.webOrderLineItemID = webOrderLineItemID
        self.subscriptionGroupIdentifier = subscriptionGroupIdentifier
        self.appAccountToken = appAccountToken
        self.promotionalOfferID = promotionalOfferID
        self.signedDate = signedDate
        self.revocationPercentage = revocationPercentage.flatMap { (0...100_000).contains($0) ? $0 : nil }
    }

    /// Whether this transaction was bought before `other`: by purchase date, then by transaction id, so that
    /// transactions of one instant still come in one order every time.
    public func wasBought(before other: StoreTransaction) -> Bool {
        (purchaseDate, transactionID) < (other.purchaseDate, other.transactionID)
    }
}

/// Apple's `pending_renewal_info` entry for one subscription (keyed by `originalTransactionID`).
public struct RenewalInfo: Codable, Sendable, Hashable {
    /// `original_transaction_id` / `originalTransactionId`: the subscription this state is for; taken from the
    /// receipt's transactions when an old `pending_renewal_info` entry lacks it.
    public var originalTransactionID: String
    /// `product_id` / `productId`: the subscription's current product; an old entry without it falls back to
    /// `auto_renew_product_id`, then to the chain's latest transaction.
    public var productID: String
    /// The product the subscription renews to next (differs from `productID` after a downgrade/crossgrade).
    public var autoRenewProductID: String?
    /// `auto_renew_status` / `autoRenewStatus`: whether auto-renew is on; false when Apple omits it.
    public var willRenew: Bool
    /// `expiration_intent` / `expirationIntent`: why the subscription expired (1 customer cancelled, 2 billing error,
    /// 3 declined a price increase, 4 product unavailable, 5 other); nil when Apple sends none.
    public var expirationIntent: Int?
    /// `is_in_billing_retry_period` / `isInBillingRetryPeriod`: Apple is still retrying a failed renewal payment;
    /// false when absent.
    public var isInBillingRetryPeriod: Bool
    /// `grace_period_expires_date_ms` / `gracePeriodExpiresDate`: when the billing grace period ends; nil when Apple
    /// sends none (no grace period).
    public var gracePeriodExpiresDate: Date?
    /// `price_consent_status`, or a signed renewal's `priceIncreaseStatus`: 1 when the user consented to a price
    /// increase, 0 when not yet; nil when Apple sends none.
    public var priceConsentStatus: Int?
    /// The `signedDate` of the payload this state came in (a notification, or signed renewal info on its own);
    /// nil for receipts and renewal refreshes, which count as now. Older state never overwrites newer.
    public var signedDate: Date?

    /// Renewal state with these values; only `willRenew` has no default, the others default as when Apple omits them.
    public init(
        originalTransactionID: String, productID: String, autoRenewProductID: String? = nil,
        willRenew: Bool, expirationIntent: Int? = nil, isInBillingRetryPeriod: Bool = false,
        gracePeriodExpiresDate: Date? = nil, priceConsentStatus: Int? = nil, signedDate: Date? = nil
    ) {
        self.originalTransactionID = originalTransactionID
        self.productID = productID
        self.autoRenewProductID = autoRenewProductID
        self.willRenew = willRenew
        self.expirationIntent = expirationIntent
        self.isInBillingRetryPeriod = isInBillingRetryPeriod
        self.gracePeriodExpiresDate = gracePeriodExpiresDate
        self.priceConsentStatus = priceConsentStatus
        self.signedDate = signedDate
    }
}
