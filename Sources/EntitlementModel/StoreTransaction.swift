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
    public var transactionID: String
    public var originalTransactionID: String
    public var productID: String
    public var purchaseDate: Date
    public var originalPurchaseDate: Date?
    /// Set for auto-renewable subscriptions only.
    public var expiresDate: Date?
    /// Set when Apple refunded or revoked the transaction (`cancellation_date_ms`).
    public var cancellationDate: Date?
    public var cancellationReason: String?
    /// True when the user upgraded to another product of the subscription group from this transaction on.
    public var isUpgraded: Bool
    public var isTrialPeriod: Bool
    public var isInIntroOfferPeriod: Bool
    public var ownership: Ownership
    public var quantity: Int
    public var webOrderLineItemID: String?
    public var subscriptionGroupIdentifier: String?
    /// The `app_account_token` the app attached at purchase (a UUID string), if any.
    public var appAccountToken: String?
    public var promotionalOfferID: String?
    /// When the App Store signed this statement of the transaction (a signed transaction's `signedDate`, or the
    /// notification's that carried it); nil for receipts, which state no date of their own. A signed statement
    /// is Apple's whole view of the transaction at that instant: a newer one may clear a refund (a reversal),
    /// an older one changes nothing.
    public var signedDate: Date?

    public init(
        transactionID: String, originalTransactionID: String, productID: String, purchaseDate: Date,
        originalPurchaseDate: Date? = nil, expiresDate: Date? = nil, cancellationDate: Date? = nil,
        cancellationReason: String? = nil, isUpgraded: Bool = false, isTrialPeriod: Bool = false,
        isInIntroOfferPeriod: Bool = false, ownership: Ownership = .purchased, quantity: Int = 1,
        webOrderLineItemID: String? = nil, subscriptionGroupIdentifier: String? = nil,
        appAccountToken: String? = nil, promotionalOfferID: String? = nil, signedDate: Date? = nil
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
    }
}

/// Apple's `pending_renewal_info` entry for one subscription (keyed by `originalTransactionID`).
public struct RenewalInfo: Codable, Sendable, Hashable {
    public var originalTransactionID: String
    public var productID: String
    /// The product the subscription renews to next (differs from `productID` after a downgrade/crossgrade).
    public var autoRenewProductID: String?
    public var willRenew: Bool
    public var expirationIntent: Int?
    public var isInBillingRetryPeriod: Bool
    public var gracePeriodExpiresDate: Date?
    public var priceConsentStatus: Int?
    /// The `signedDate` of the payload this state came in (a notification, or signed renewal info on its own);
    /// nil for receipts and renewal refreshes, which count as now. Older state never overwrites newer.
    public var signedDate: Date?

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
