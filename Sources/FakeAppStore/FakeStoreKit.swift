import EntitlementModel
import Foundation

/// The StoreKit 2 purchases the fake App Store made, free of I/O: transactions by id, each purchase's
/// transactions in order under its original transaction id, and the renewal state of each auto-renewable
/// subscription. The signed transactions, the server notifications and the verifyReceipt receipts the fake
/// hands out are all rendered from it, so they always agree.
///
/// Times are milliseconds since 1970; `now` is passed in. Transaction and web-order-line-item ids are
/// numeric strings from a counter that starts at a random 16-digit number, so ids stay unique across fakes
/// and restarts.
struct FakeStoreKit {
    /// What every transaction of this fake carries.
    struct Settings: Sendable, Equatable {
        var bundleID: String
        var appAppleID: Int64
    }

    /// One purchase as `POST /control/storekit/purchases` asks for it; nil members take their defaults.
    struct Purchase: Sendable, Equatable {
        var productID: String?
        var type: ProductType?
        var appAccountToken: String?
        var environment: StoreEnvironment?
        var quantity: Int?
        var purchaseDate: Int64?
        var expiresDate: Int64?
        /// A renewal of this existing auto-renewable subscription instead of a new purchase.
        var originalTransactionID: String?
        var transactionID: String?
        /// How long each period of an auto-renewable subscription runs (default one month).
        var period: ISODuration?
        var price: Int64?
        var currency: String?
        var storefront: String?
        var ownership: Ownership?
        var subscriptionGroupIdentifier: String?
        /// The App Store account buying (default `customer`).
        var customer: String?
        /// The order to add the purchase to (default a new one): an order may hold several purchases.
        var orderID: String?
    }

    /// What a change did: the transaction it concerns and the notification Apple would send about it.
    struct Change: Sendable, Equatable {
        var transactionID: String
        var notificationType: String
        var subtype: String?
    }

    let settings: Settings
    /// Apple's `appTransactionId`: one app download, shared by every transaction of this fake.
    let appTransactionID: String
    private(set) var transactions: [String: FakeStoreKitTransaction] = [:]
    /// Transaction ids by original transaction id, oldest first.
    private(set) var chains: [String: [String]] = [:]
    private(set) var renewals: [String: FakeStoreKitRenewal] = [:]
    private var counter: UInt64

    static let defaultPeriod = ISODuration(months: 1)
    /// The account of purchases that name none.
    static let defaultCustomer = "customer"
    /// Apple's grace periods run 3, 16 or 28 days; 16 unless a change names its end.
    static let defaultGraceMs: Int64 = 16 * 86_400_000
    static let storefrontIDs = ["USA": "143441", "GBR": "143444", "DEU": "143443", "FRA": "143442", "JPN": "143462", "CAN": "143455"]

    init(settings: Settings, firstID: UInt64 = 2_000_000_000_000_000 + UInt64.random(in: 0..<1_000_000_000) * 1_000_000) {
        self.settings = settings
        counter = firstID
        appTransactionID = "70" + String(firstID)
    }

    /// Forgets every purchase (ids keep counting, so none is handed out twice).
    mutating func reset() {
        transactions = [:]
        chains = [:]
        renewals = [:]
    }

    /// The transactions of `originalTransactionID`, oldest first; empty when unknown.
    func chain(_ originalTransactionID: String) -> [FakeStoreKitTransaction] {
        (chains[originalTransactionID] ?? []).compactMap { transactions[$0] }
    }

    /// Apple's status of the subscription `originalTransactionID` at `now`; nil for anything else.
    func status(of originalTransactionID: String, now: Int64) -> AppStoreSubscriptionStatus? {
        guard let renewal = renewals[originalTransactionID], let latest = chain(originalTransactionID).last else { return nil }
        if latest.revocationDate != nil { return .revoked }
        if renewal.isInBillingRetryPeriod {
            return (renewal.gracePeriodExpiresDate ?? .min) > now ? .gracePeriod : .billingRetry
        }
        return (latest.expiresDate ?? .max) > now ? .active : .expired
    }

    // MARK: - Purchases

    /// Records `purchase` (a renewal when it names an original transaction) and returns what it did.
    mutating func purchase(_ purchase: Purchase, now: Int64) throws(FakeStoreKitError) -> Change {
        if let original = purchase.originalTransactionID {
            if let type = purchase.type, type != .autoRenewable {
                throw .badRequest("Only an auto-renewable subscription renews; 'type' must be auto_renewable with 'original_transaction_id'.", field: "type")
            }
            return try renew(original, productID: purchase.productID, transactionID: purchase.transactionID,
                             purchaseDate: purchase.purchaseDate, expiresDate: purchase.expiresDate, now: now)
        }
        guard let productID = purchase.productID else { throw .badRequest("The field 'product_id' is missing.", field: "product_id") }
        guard let type = purchase.type else { throw .badRequest("The field 'type' is missing.", field: "type") }
        let transactionID = try newTransactionID(purchase.transactionID)
        let purchased = purchase.purchaseDate ?? now
        let period = purchase.period ?? Self.defaultPeriod
        var expires = purchase.expiresDate
        if type == .autoRenewable, expires == nil { expires = Self.adding(period, to: purchased) }
        if let expires, expires <= purchased {
            throw .badRequest("'expires_date' must be after 'purchase_date'.", field: "expires_date")
        }
        if type != .autoRenewable && type != .nonRenewing && purchase.expiresDate != nil {
            throw .badRequest("Only a subscription has an 'expires_date'.", field: "expires_date")
        }
        let customer = purchase.customer ?? Self.defaultCustomer, environment = purchase.environment ?? .sandbox
        if let order = purchase.orderID, let other = transactions.values.first(where: { $0.orderID == order }),
           other.customer != customer || other.environment != environment {
            throw .conflict("Order '\(order)' is another customer's or another environment's.", field: "order_id")
        }
        let subscription = type == .autoRenewable
        let storefront = purchase.storefront ?? "USA"
        let transaction = FakeStoreKitTransaction(
            transactionID: transactionID, originalTransactionID: transactionID, productID: productID, type: type,
            purchaseDate: purchased, originalPurchaseDate: purchased, expiresDate: expires,
            quantity: purchase.quantity ?? 1, appAccountToken: purchase.appAccountToken,
            environment: environment, bundleID: settings.bundleID, storefront: storefront,
            storefrontID: Self.storefrontIDs[storefront] ?? "143441", price: purchase.price ?? 990,
            currency: purchase.currency ?? "USD", ownership: purchase.ownership ?? .purchased,
            webOrderLineItemID: subscription ? nextID() : nil,
            subscriptionGroupIdentifier: subscription ? purchase.subscriptionGroupIdentifier ?? "21345678" : nil,
            isUpgraded: false, transactionReason: "PURCHASE", appTransactionID: appTransactionID,
            customer: customer, orderID: purchase.orderID ?? newOrderID())
        transactions[transactionID] = transaction
        chains[transactionID] = [transactionID]
        guard subscription else { return Change(transactionID: transactionID, notificationType: "ONE_TIME_CHARGE") }
        renewals[transactionID] = FakeStoreKitRenewal(
            originalTransactionID: transactionID, productID: productID, autoRenewProductID: productID,
            autoRenewStatus: true, isInBillingRetryPeriod: false, recentSubscriptionStartDate: purchased,
            period: period, renewalPrice: transaction.price, currency: transaction.currency)
        return Change(transactionID: transactionID, notificationType: "SUBSCRIBED", subtype: "INITIAL_BUY")
    }

    /// A new period of the subscription `original`: of `productID` (default the auto-renew product), from
    /// `purchaseDate` (default the end of the last period, or `now` when that has passed or billing failed)
    /// to `expiresDate` (default one renewal period later). Ends any billing retry; renews an expired
    /// subscription (a resubscription) with auto-renew on again.
    mutating func renew(
        _ original: String, productID: String? = nil, transactionID: String? = nil,
        purchaseDate: Int64? = nil, expiresDate: Int64? = nil, now: Int64
    ) throws(FakeStoreKitError) -> Change {
        let (latest, current) = try subscription(original)
        var renewal = current
        let status = status(of: original, now: now)
        let lapsed = renewal.isInBillingRetryPeriod || status == .expired || status == .revoked
        let purchased = purchaseDate ?? (lapsed ? now : max(latest.expiresDate ?? now, now))
        let product = productID ?? renewal.autoRenewProductID
        let id = try appendPeriod(to: original, after: latest, id: transactionID, productID: product, purchased: purchased,
                                  expires: expiresDate ?? Self.adding(renewal.period, to: purchased), reason: "RENEWAL")
        let change: Change = switch (renewal.isInBillingRetryPeriod, lapsed) {
        case (true, _): Change(transactionID: id, notificationType: "DID_RENEW", subtype: "BILLING_RECOVERY")
        case (false, true): Change(transactionID: id, notificationType: "SUBSCRIBED", subtype: "RESUBSCRIBE")
        case (false, false): Change(transactionID: id, notificationType: "DID_RENEW")
        }
        if lapsed && !renewal.isInBillingRetryPeriod { renewal.recentSubscriptionStartDate = purchased }
        renewal.productID = product
        renewal.autoRenewProductID = product
        renewal.autoRenewStatus = true
        renewal.expirationIntent = nil
        renewal.isInBillingRetryPeriod = false
        renewal.gracePeriodExpiresDate = nil
        renewals[original] = renewal
        return change
    }

    // MARK: - Changes of any purchase

    /// Apple refunded (`REFUND`) or, with `familyRevoke`, withdrew from Family Sharing (`REVOKE`) the
    /// transaction `transactionID` of `original` (default its latest) at `date` (default `now`).
    mutating func revoke(
        _ original: String, transactionID: String?, reason: Int, date: Int64?, familyRevoke: Bool, now: Int64
    ) throws(FakeStoreKitError) -> Change {
        var transaction = try member(original, transactionID)
        guard transaction.revocationDate == nil else {
            throw .conflict("Transaction \(transaction.transactionID) is refunded or revoked already.", field: "transaction_id")
        }
        transaction.revocationDate = date ?? now
        transaction.revocationReason = reason
        transactions[transaction.transactionID] = transaction
        return Change(transactionID: transaction.transactionID, notificationType: familyRevoke ? "REVOKE" : "REFUND")
    }

    /// Apple reversed the refund of `transactionID` of `original` (default its latest): `REFUND_REVERSED`.
    mutating func reverseRefund(_ original: String, transactionID: String?) throws(FakeStoreKitError) -> Change {
        var transaction = try member(original, transactionID)
        guard transaction.revocationDate != nil else {
            throw .conflict("Transaction \(transaction.transactionID) is not refunded.", field: "transaction_id")
        }
        transaction.revocationDate = nil
        transaction.revocationReason = nil
        transactions[transaction.transactionID] = transaction
        return Change(transactionID: transaction.transactionID, notificationType: "REFUND_REVERSED")
    }

    // MARK: - Subscription lifecycle

    /// The subscription ended for `intent` (1 voluntary, 2 billing, 3 price increase, 4 product not for
    /// sale, 5 other): its last period ends at `date` (default `now`) if it ran longer, auto-renew is off and
    /// any billing retry over. `EXPIRED` with the intent's subtype.
    mutating func expire(_ original: String, intent: Int, date: Int64?, now: Int64) throws(FakeStoreKitError) -> Change {
        let (latest, renewal) = try endPeriod(original, at: date ?? now)
        var changed = renewal
        changed.autoRenewStatus = false
        changed.expirationIntent = intent
        changed.isInBillingRetryPeriod = false
        changed.gracePeriodExpiresDate = nil
        renewals[original] = changed
        let subtypes = [1: "VOLUNTARY", 2: "BILLING_RETRY", 3: "PRICE_INCREASE", 4: "PRODUCT_NOT_FOR_SALE"]
        return Change(transactionID: latest.transactionID, notificationType: "EXPIRED", subtype: subtypes[intent])
    }

    /// The renewal failed on a billing error: the last period ends now (if it ran longer) and Apple keeps
    /// retrying; with `graceUntil` the user keeps access until then (a grace period). `DID_FAIL_TO_RENEW`,
    /// subtype `GRACE_PERIOD` with a grace period.
    mutating func failRenewal(_ original: String, graceUntil: Int64?, now: Int64) throws(FakeStoreKitError) -> Change {
        let (latest, renewal) = try endPeriod(original, at: now)
        var changed = renewal
        changed.autoRenewStatus = true
        changed.expirationIntent = 2
        changed.isInBillingRetryPeriod = true
        changed.gracePeriodExpiresDate = graceUntil
        renewals[original] = changed
        return Change(transactionID: latest.transactionID, notificationType: "DID_FAIL_TO_RENEW",
                      subtype: graceUntil == nil ? nil : "GRACE_PERIOD")
    }

    /// The user turned auto-renew on or off: `DID_CHANGE_RENEWAL_STATUS`.
    mutating func setAutoRenew(_ original: String, _ on: Bool) throws(FakeStoreKitError) -> Change {
        let (latest, current) = try subscription(original)
        var renewal = current
        renewal.autoRenewStatus = on
        renewals[original] = renewal
        return Change(transactionID: latest.transactionID, notificationType: "DID_CHANGE_RENEWAL_STATUS",
                      subtype: on ? "AUTO_RENEW_ENABLED" : "AUTO_RENEW_DISABLED")
    }

    /// The user upgraded to `productID`, effective at once: the running period is marked `isUpgraded` and a
    /// new period of the new product starts now (to `expiresDate`, default one period later).
    /// `DID_CHANGE_RENEWAL_PREF` / `UPGRADE` about the new transaction.
    mutating func upgrade(
        _ original: String, to productID: String, transactionID: String?, expiresDate: Int64?, now: Int64
    ) throws(FakeStoreKitError) -> Change {
        let (latest, current) = try subscription(original)
        var renewal = current
        let id = try appendPeriod(to: original, after: latest, id: transactionID, productID: productID, purchased: now,
                                  expires: expiresDate ?? Self.adding(renewal.period, to: now), reason: "PURCHASE")
        transactions[latest.transactionID]?.isUpgraded = true
        renewal.productID = productID
        renewal.autoRenewProductID = productID
        renewals[original] = renewal
        return Change(transactionID: id, notificationType: "DID_CHANGE_RENEWAL_PREF", subtype: "UPGRADE")
    }

    /// The user downgraded to `productID`, effective at the next renewal: `DID_CHANGE_RENEWAL_PREF` /
    /// `DOWNGRADE`.
    mutating func downgrade(_ original: String, to productID: String) throws(FakeStoreKitError) -> Change {
        let (latest, current) = try subscription(original)
        var renewal = current
        renewal.autoRenewProductID = productID
        renewals[original] = renewal
        return Change(transactionID: latest.transactionID, notificationType: "DID_CHANGE_RENEWAL_PREF", subtype: "DOWNGRADE")
    }

    // MARK: - Helpers

    /// Adds a period of `productID` from `purchased` to `expires` to the subscription `original`: a copy of
    /// its latest transaction (`after`) with a new transaction id (`id` when given) and web order line item,
    /// neither refunded nor upgraded. Returns its transaction id.
    private mutating func appendPeriod(
        to original: String, after latest: FakeStoreKitTransaction, id: String?, productID: String,
        purchased: Int64, expires: Int64, reason: String
    ) throws(FakeStoreKitError) -> String {
        guard expires > purchased else { throw .badRequest("'expires_date' must be after the period's purchase date.", field: "expires_date") }
        var period = latest
        period.transactionID = try newTransactionID(id)
        period.productID = productID
        period.purchaseDate = purchased
        period.expiresDate = expires
        period.revocationDate = nil
        period.revocationReason = nil
        period.isUpgraded = false
        period.webOrderLineItemID = nextID()
        period.transactionReason = reason
        period.orderID = newOrderID()
        transactions[period.transactionID] = period
        chains[original, default: []].append(period.transactionID)
        return period.transactionID
    }

    /// The latest transaction and the renewal state of the auto-renewable subscription `original`.
    private func subscription(_ original: String) throws(FakeStoreKitError) -> (FakeStoreKitTransaction, FakeStoreKitRenewal) {
        guard let latest = chain(original).last else { throw .notFound("No purchase has original transaction id '\(original)'.") }
        guard let renewal = renewals[original] else {
            throw .conflict("Purchase \(original) is a \(latest.type.rawValue) purchase, not an auto-renewable subscription.")
        }
        return (latest, renewal)
    }

    /// Cuts the last period of `original` short to end at `date` when it runs past it (a renewed period
    /// that had not begun yet then begins at `date` too): the fake cannot wait for time to pass.
    private mutating func endPeriod(_ original: String, at date: Int64) throws(FakeStoreKitError) -> (FakeStoreKitTransaction, FakeStoreKitRenewal) {
        let (running, renewal) = try subscription(original)
        var latest = running
        if let expires = latest.expiresDate, expires > date {
            latest.expiresDate = date
            latest.purchaseDate = min(latest.purchaseDate, date)
            transactions[latest.transactionID] = latest
        }
        return (latest, renewal)
    }

    /// The transaction `transactionID` of the purchase `original`, or its latest when nil.
    private func member(_ original: String, _ transactionID: String?) throws(FakeStoreKitError) -> FakeStoreKitTransaction {
        let chain = chain(original)
        guard let latest = chain.last else { throw .notFound("No purchase has original transaction id '\(original)'.") }
        guard let transactionID else { return latest }
        guard let transaction = chain.first(where: { $0.transactionID == transactionID }) else {
            throw .badRequest("Transaction '\(transactionID)' is not one of purchase \(original).", field: "transaction_id")
        }
        return transaction
    }

    /// `wanted` when no transaction has it yet, else a fresh id.
    private mutating func newTransactionID(_ wanted: String?) throws(FakeStoreKitError) -> String {
        guard let wanted else {
            var id = nextID()
            while transactions[id] != nil { id = nextID() }
            return id
        }
        guard transactions[wanted] == nil else {
            throw .conflict("Transaction id '\(wanted)' is taken.", field: "transaction_id")
        }
        return wanted
    }

    /// A new order id shaped like Apple's (`M` and ten or more capital letters and digits).
    private mutating func newOrderID() -> String {
        counter += 1
        return "M" + String(counter, radix: 36).uppercased()
    }

    private mutating func nextID() -> String {
        counter += 1
        return String(counter)
    }

    /// `milliseconds` plus `duration`, on the UTC calendar.
    static func adding(_ duration: ISODuration, to milliseconds: Int64) -> Int64 {
        duration.adding(to: Date(milliseconds: milliseconds)).milliseconds
    }
}
