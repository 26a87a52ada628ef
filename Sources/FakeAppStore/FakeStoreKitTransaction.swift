import EntitlementModel

/// One StoreKit 2 transaction the fake App Store sold, with the members of Apple's
/// `JWSTransactionDecodedPayload` (dates in milliseconds since 1970, as Apple writes them).
struct FakeStoreKitTransaction: Sendable, Equatable {
    var transactionID: String
    var originalTransactionID: String
    var productID: String
    var type: ProductType
    var purchaseDate: Int64
    var originalPurchaseDate: Int64
    /// Auto-renewable subscriptions always; non-renewing ones only when the purchase named one.
    var expiresDate: Int64?
    var quantity: Int
    var appAccountToken: String?
    var environment: StoreEnvironment
    var bundleID: String
    /// ISO 3166-1 alpha-3 code of the storefront (`USA`) and Apple's storefront id (`143441`).
    var storefront: String
    var storefrontID: String
    /// In milliunits of `currency` (4990 is 4.99).
    var price: Int64
    var currency: String
    var revocationDate: Int64?
    /// Apple's `revocationReason`: 0 another reason, 1 an issue in the app.
    var revocationReason: Int?
    var ownership: Ownership
    /// Subscriptions only, a new one per period.
    var webOrderLineItemID: String?
    var subscriptionGroupIdentifier: String?
    /// True once the user upgraded away from this period (Apple writes `isUpgraded` only when true).
    var isUpgraded: Bool
    /// `PURCHASE` or `RENEWAL`.
    var transactionReason: String
    var appTransactionID: String
    /// The App Store account that bought it: the Server API's history and statuses are per customer.
    var customer: String
    /// The order on the customer's receipt email (Look Up Order ID); a new one per period.
    var orderID: String
}

/// The renewal state of one auto-renewable subscription (Apple's `JWSRenewalInfoDecodedPayload`), keyed by
/// its original transaction.
struct FakeStoreKitRenewal: Sendable, Equatable {
    var originalTransactionID: String
    /// The product of the running period.
    var productID: String
    /// The product the next period renews to (another after a downgrade).
    var autoRenewProductID: String
    var autoRenewStatus: Bool
    /// 1 cancelled, 2 billing error, 3 no consent to a price increase, 4 product unavailable, 5 other.
    var expirationIntent: Int?
    var isInBillingRetryPeriod: Bool
    var gracePeriodExpiresDate: Int64?
    /// When the current run of uninterrupted periods began.
    var recentSubscriptionStartDate: Int64
    /// How long a renewed period runs.
    var period: ISODuration
    var renewalPrice: Int64
    var currency: String
}

extension ProductType {
    /// Apple's `type` string in signed transactions.
    var appleType: String {
        switch self {
        case .consumable: "Consumable"
        case .nonConsumable: "Non-Consumable"
        case .autoRenewable: "Auto-Renewable Subscription"
        case .nonRenewing: "Non-Renewing Subscription"
        }
    }
}

/// Why the StoreKit store refused a change: a 400 naming the field, an unknown purchase (404) or a change
/// that does not fit the purchase (409).
struct FakeStoreKitError: Error, Equatable {
    var status: Int
    var message: String
    var field: String?

    static func badRequest(_ message: String, field: String) -> FakeStoreKitError {
        FakeStoreKitError(status: 400, message: message, field: field)
    }

    static func notFound(_ message: String) -> FakeStoreKitError {
        FakeStoreKitError(status: 404, message: message)
    }

    static func conflict(_ message: String, field: String? = nil) -> FakeStoreKitError {
        FakeStoreKitError(status: 409, message: message, field: field)
    }
}
