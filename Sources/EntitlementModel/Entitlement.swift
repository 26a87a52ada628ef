import Foundation

/// What a user holds for one entitlement name at one instant, and where it comes from.
///
/// Encodes as one value of the `entitlements` object of `GET /v1/users/{user_id}/entitlements`, with
/// snake_case keys and RFC 3339 times whatever the encoder's strategies:
/// `{"active", "source": "app_store", "product_id", "product_type", "expires_at", "environment", "will_renew",
/// "in_grace_period", "in_billing_retry", "ownership", "original_transaction_id"}` for App Store purchases,
/// `{"active", "source": "grant", "grant_id", "reason", "expires_at"}` for grants, plus `"inactive_reason"`
/// when not active. `expires_at` is `null` for lifetime access.
public struct Entitlement: Sendable, Hashable, Encodable {
    /// While active: when access ends (nil = lifetime; for a subscription in its grace period, the end of the
    /// grace period). While inactive: when access ended (expiry, end of grace, refund or revocation).
    public var expiresAt: Date?
    /// Why the entitlement is not active; nil while it is.
    public var inactiveReason: InactiveReason?
    /// An App Store purchase or an admin grant; decides which fields the entitlement encodes.
    public var source: EntitlementSource

    /// An entitlement with these values; it is active exactly when `inactiveReason` is nil.
    public init(expiresAt: Date?, inactiveReason: InactiveReason?, source: EntitlementSource) {
        self.expiresAt = expiresAt
        self.inactiveReason = inactiveReason
        self.source = source
    }

    /// True while the user has access.
    public var active: Bool { inactiveReason == nil }

    enum CodingKeys: String, CodingKey {
        case active
        case source
        case productID = "product_id"
        case productType = "product_type"
        case expiresAt = "expires_at"
        case environment
        case willRenew = "will_renew"
        case inGracePeriod = "in_grace_period"
        case inBillingRetry = "in_billing_retry"
        case ownership
        case originalTransactionID = "original_transaction_id"
        case grantID = "grant_id"
        case reason
        case inactiveReason = "inactive_reason"
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        let expires = expiresAt.map(RFC3339.string(from:))
        try container.encode(active, forKey: .active)
        switch source {
        case .appStore(let purchase):
            try container.encode("app_store", forKey: .source)
            try container.encode(purchase.productID, forKey: .productID)
            try container.encode(purchase.productType, forKey: .productType)
            try container.encode(expires, forKey: .expiresAt)
            try container.encode(purchase.environment, forKey: .environment)
            try container.encode(purchase.willRenew, forKey: .willRenew)
            try container.encode(purchase.inGracePeriod, forKey: .inGracePeriod)
            try container.encode(purchase.inBillingRetry, forKey: .inBillingRetry)
            try container.encode(purchase.ownership, forKey: .ownership)
            try container.encode(purchase.originalTransactionID, forKey: .originalTransactionID)
        case .grant(let id, let reason):
            try container.encode("grant", forKey: .source)
            try container.encode(id, forKey: .grantID)
            try container.encode(reason, forKey: .reason)
            try container.encode(expires, forKey: .expiresAt)
        }
        try container.encodeIfPresent(inactiveReason, forKey: .inactiveReason)
    }
}

/// Where an entitlement comes from.
public enum EntitlementSource: Sendable, Hashable {
    /// An App Store purchase.
    case appStore(AppStorePurchase)
    /// An admin grant: its id and the admin's reason.
    case grant(id: String, reason: String)
}

/// The App Store purchase behind an entitlement.
public struct AppStorePurchase: Sendable, Hashable {
    /// The product's App Store identifier (`product_id`), as in the catalog.
    public var productID: String
    /// The catalog's type of the product (`product_type`), not Apple's.
    public var productType: ProductType
    /// The environment whose verification reported the purchase (`environment`).
    public var environment: StoreEnvironment
    /// Whether the subscription will renew at its expiry (always false for other product types).
    public var willRenew: Bool
    /// True while access continues past the expiry through the billing grace period.
    public var inGracePeriod: Bool
    /// True while Apple keeps retrying a failed renewal payment.
    public var inBillingRetry: Bool
    /// The transaction's `in_app_ownership_type`, written as `ownership` (`purchased` or `family_shared`).
    public var ownership: Ownership
    /// The transaction's `original_transaction_id` (for a subscription, its chain's first transaction).
    public var originalTransactionID: String

    /// A purchase with these values; the flags default to false and `ownership` to `.purchased`.
    public init(productID: String, productType: ProductType, environment: StoreEnvironment,
                willRenew: Bool = false, inGracePeriod: Bool = false, inBillingRetry: Bool = false,
                ownership: Ownership = .purchased, originalTransactionID: String) {
        self.productID = productID
        self.productType = productType
        self.environment = environment
        self.willRenew = willRenew
        self.inGracePeriod = inGracePeriod
        self.inBillingRetry = inBillingRetry
        self.ownership = ownership
        self.originalTransactionID = originalTransactionID
    }
}

/// Why an entitlement the user had is not active.
public enum InactiveReason: String, Sendable, Hashable, Codable {
    /// The subscription, non-renewing period or grant ran out (including after its grace period).
    case expired
    /// Apple refunded the purchase.
    case refunded
    /// An admin revoked the grant, or Family Sharing ended for a family-shared purchase (Apple's `REVOKE`).
    case revoked
    /// Apple stopped retrying a failed renewal payment (`expiration_intent` 2, no longer in billing retry).
    case billingRetryEnded = "billing_retry_ended"
}
