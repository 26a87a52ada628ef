import Foundation

/// Why a user's entitlements or balances changed: the `type` of a webhook event.
public enum EntitlementEventType: String, Sendable, Hashable, Codable, CaseIterable {
    case initialPurchase = "initial_purchase"
    case renewal
    case nonRenewingPurchase = "non_renewing_purchase"
    case nonConsumablePurchase = "non_consumable_purchase"
    case consumablePurchase = "consumable_purchase"
    /// Auto-renew turned off.
    case cancellation
    /// Auto-renew turned back on.
    case uncancellation
    case billingIssue = "billing_issue"
    case expiration
    case refund
    case refundReversed = "refund_reversed"
    /// Family Sharing ended for a shared purchase.
    case revoke
    case productChange = "product_change"
    /// A purchase moved between users; sent for both of them.
    case transfer
    case grant
    case grantRevoked = "grant_revoked"
    case consumableSpent = "consumable_spent"
    /// An admin changed what a product the user owns unlocks (as built: not in API.md's list).
    case catalogChange = "catalog_change"
}

/// What a user holds as `GET /v1/users/{user_id}/entitlements` answers it, without its instant: an event is
/// due exactly when this differs before and after a change.
public struct EntitlementState: Sendable, Hashable {
    /// Every entitlement the user has or had, by name.
    public var entitlements: [String: Entitlement]
    /// Consumable balances by currency.
    public var consumables: [String: Int]

    /// A state with these entitlements and balances (both empty by default: a user who holds nothing).
    public init(entitlements: [String: Entitlement] = [:], consumables: [String: Int] = [:]) {
        self.entitlements = entitlements
        self.consumables = consumables
    }

    /// The state a `GET /v1/users/{user_id}/entitlements` body shows, without its user, instant and `unknown_products`.
    public init(_ document: EntitlementsDocument) {
        self.init(entitlements: document.entitlements, consumables: document.consumables)
    }
}

/// What Apple reported in one recording (a receipt, a signed transaction, a notification or a status
/// refresh), as far as naming the cause of a change needs it.
public struct AppStoreReport: Sendable, Hashable {
    /// The transactions recorded, each with the environment that reported it.
    public var transactions: [OwnedTransaction]
    /// Ids of the transactions this recording stored for the first time.
    public var newTransactionIDs: Set<String>
    /// Ids of the consumable transactions whose refund this recording credited back (Apple reversed it), however
    /// Apple told it (a notification, a status refresh, a receipt).
    public var reversedTransactionIDs: Set<String>
    /// The App Store Server Notification's `notificationType` and `subtype`, when the report is one.
    public var notificationType: String?
    /// The V2 `subtype` (`AUTO_RENEW_DISABLED`, `RESUBSCRIBE`…); nil when the notification has none or the report is
    /// not a notification.
    public var subtype: String?
    /// The catalog's type of each recorded product (to tell which transaction bought consumables).
    public var productTypes: [String: ProductType]

    /// A report of these transactions; leave the notification fields nil for a receipt, a signed transaction or a
    /// status refresh.
    public init(transactions: [OwnedTransaction], newTransactionIDs: Set<String>, reversedTransactionIDs: Set<String> = [],
                notificationType: String? = nil, subtype: String? = nil, productTypes: [String: ProductType] = [:]) {
        self.transactions = transactions
        self.newTransactionIDs = newTransactionIDs
        self.reversedTransactionIDs = reversedTransactionIDs
        self.notificationType = notificationType
        self.subtype = subtype
        self.productTypes = productTypes
    }
}

/// What changed a user's state, as the service knows it when it records the change.
public enum EntitlementChangeCause: Sendable, Hashable {
    /// Apple's data was recorded for this user.
    case appStore(AppStoreReport)
    /// Purchases moved to this user, each (by original transaction id) from the user named, by the recording
    /// `report` describes.
    case transferredIn(from: [String: String], report: AppStoreReport)
    /// Purchases moved from this user, each (by original transaction id) to the user named, by the recording
    /// `report` describes.
    case transferredOut(to: [String: String], report: AppStoreReport)
    case grant(id: String)
    case grantRevoked(id: String)
    case consumableSpent(currency: String)
    /// The catalog entry of this product, which the user owns, changed what it unlocks (nil: entries of several
    /// products).
    case catalogChanged(productID: String?)
    /// Time alone: an entitlement's end passed, or what Apple recorded ahead of its date (a renewal, a change of
    /// product at the renewal date) came into force. `transactions`: the user's transactions bought by then,
    /// for the transaction the event is about.
    case timePassed(transactions: [OwnedTransaction])
}

/// One event derived from a change: its type and the purchase it is about (absent where it does not apply).
public struct DerivedEntitlementEvent: Sendable, Hashable {
    /// Why the state changed; written as the webhook event's `type`.
    public var type: EntitlementEventType
    /// The App Store product concerned (`product_id`); nil for grants and spends, and for a catalog change of several
    /// products.
    public var productID: String?
    /// The newest transaction of that purchase in the recording (`transaction_id`); nil when the recording carried
    /// none, or no purchase applies.
    public var transactionID: String?
    /// The purchase's `original_transaction_id` (its subscription chain); nil where no App Store purchase applies.
    public var originalTransactionID: String?
    /// The environment of the App Store purchase concerned; nil for grants and spends.
    public var environment: StoreEnvironment?
    /// For `transfer`: the previous owner (on the new owner's event) or the new one (on the previous owner's).
    public var transferredFrom: String?
    /// For `transfer`, on the previous owner's event: the user the purchases moved to; nil otherwise.
    public var transferredTo: String?

    /// An event with these fields; all but `type` default to nil (an event about no purchase).
    public init(type: EntitlementEventType, productID: String? = nil, transactionID: String? = nil,
                originalTransactionID: String? = nil, environment: StoreEnvironment? = nil,
                transferredFrom: String? = nil, transferredTo: String? = nil) {
        self.type = type
        self.productID = productID
        self.transactionID = transactionID
        self.originalTransactionID = originalTransactionID
        self.environment = environment
        self.transferredFrom = transferredFrom
        self.transferredTo = transferredTo
    }
}
