import Foundation

extension DerivedEntitlementEvent {
    /// The event a change from `before` to `after` calls for, or nil when the user's state did not change
    /// (an event is due exactly when what `GET /v1/users/{user_id}/entitlements` answers changes).
    ///
    /// Admin actions (grants and catalog changes), spends and transfers name their own type (a transfer carries the
    /// purchase it is about); time alone names an `expiration` when an end passed (a `product_change` when the
    /// same subscription goes on as another product at that instant), else the change it brought (a renewal Apple
    /// recorded ahead of its date), with the purchase and its newest transaction. For Apple's data the type comes from
    /// the difference itself, entitlement by entitlement, and the most significant one names the event
    /// (refund, revoke, refund reversed, product change, a purchase, renewal, billing issue, expiration,
    /// cancellation, uncancellation, then consumable credits):
    /// - active after, not before: a purchase by the product's type (`initial_purchase` for a subscription,
    ///   `renewal` when the same subscription had lapsed or `product_change` when it comes back as another
    ///   product, `refund_reversed` when it had been refunded or revoked, `billing_issue` when access is a grace
    ///   period);
    /// - active before and after: another product of the subscription → `product_change` (also when one
    ///   entitlement ends as another starts with the same subscription's new product); another purchase of the
    ///   same product → a purchase by its type (either one a `refund`, or `revoke`, about the purchase before when
    ///   it was taken back and the other took over); a later end →
    ///   `renewal` (`non_renewing_purchase` for a stacked pass); billing retry or grace starting →
    ///   `billing_issue`; auto-renew off/on → `cancellation`/`uncancellation`; an earlier end → `refund`;
    /// - active before, not after: refunded → `refund`, revoked (a family-shared purchase) → `revoke`, billing
    ///   retry starting (a renewal failed, no grace period) → `billing_issue`, otherwise `expiration`;
    /// - inactive before and after: refunded → `refund`, revoked → `revoke`, billing retry starting →
    ///   `billing_issue`, otherwise `expiration`;
    /// - a balance going up → `consumable_purchase` (`refund_reversed` by a `REFUND_REVERSED` notification), down
    ///   → `refund`, first shown at zero (credited and refunded at once) → `refund`.
    /// A difference none of these names (say, a lapsed purchase first seen) takes the notification's own
    /// meaning when there is one, else `expiration` for a claim that is not active, else `renewal`.
    public static func derive(before: EntitlementState, after: EntitlementState,
                              cause: EntitlementChangeCause) -> DerivedEntitlementEvent? {
        guard before != after else { return nil }
        switch cause {
        case .grant:
            return DerivedEntitlementEvent(type: .grant)
        case .grantRevoked:
            return DerivedEntitlementEvent(type: .grantRevoked)
        case .consumableSpent:
            return DerivedEntitlementEvent(type: .consumableSpent)
        case .catalogChanged(let productID):
            return DerivedEntitlementEvent(type: .catalogChange, productID: productID)
        case .transferredIn(let users, let report), .transferredOut(let users, let report):
            // About a purchase that moved, with the user it moved from (or to): purchases from several users in one
            // recording each have their own.
            var event: DerivedEntitlementEvent
            let movedChain: String?
            if let moved = Self.movedPurchase(before: before, after: after, among: Set(users.keys)) {
                event = DerivedEntitlementEvent(type: .transfer, purchase: moved, report: report)
                movedChain = moved.originalTransactionID
            } else if let newest = report.transactions.filter({ users[$0.transaction.originalTransactionID] != nil })
                        .max(by: { $0.transaction.wasBought(before: $1.transaction) }) {
                // A purchase that gave nothing any more (ended, refunded) moved: only its listing changed, and the
                // event still names it, as the recording shows it.
                event = DerivedEntitlementEvent(type: .transfer, transaction: newest)
                movedChain = newest.transaction.originalTransactionID
            } else {
                event = DerivedEntitlementEvent(type: .transfer)
                movedChain = nil
            }
            let counterpart = movedChain.flatMap { users[$0] } ?? users.values.min()
            if case .transferredIn = cause { event.transferredFrom = counterpart } else { event.transferredTo = counterpart }
            return event
        case .timePassed(let transactions):
            // An end passing is an expiration, whatever else changed at that instant; with no end, time brought in
            // what Apple recorded ahead: a renewal (the usual one, bought at the old expiry) or a change of product.
            let changes = Self.changes(before: before, after: after)
            let report = AppStoreReport(transactions: transactions, newTransactionIDs: [])
            // A subscription renewed into another product of its group (a change recorded ahead).
            if let switched = Self.productSwitch(in: changes) {
                return DerivedEntitlementEvent(type: .productChange, purchase: switched.purchase, report: report)
            }
            let ended = changes.first { $0.type == .expiration }
            let change = (ended ?? changes.min { $0.rank < $1.rank }).map { $0.takenBack(in: report) ?? $0 }
            return DerivedEntitlementEvent(type: change?.type ?? .expiration, purchase: change?.purchase, report: report)
        case .appStore(let report):
            let changes = Self.changes(before: before, after: after)
            let meaning = report.notificationType.flatMap { Self.meaning(ofNotification: $0, subtype: report.subtype) }
            if var change = changes.min(by: { $0.rank < $1.rank }).map({ $0.takenBack(in: report) ?? $0 }) {
                // An upgrade or downgrade to a product of the group that gives other entitlements, unless a refund,
                // revoke or reversal outranks it.
                if change.rank > Change(type: .productChange).rank, let switched = Self.productSwitch(in: changes) { change = switched }
                // Apple's reversal of a refund brings a purchase back: whatever held the entitlement meanwhile (a
                // grant), and whether the end moved or not, that is the reversal.
                if meaning == .refundReversed, [.initialPurchase, .nonConsumablePurchase, .nonRenewingPurchase, .renewal].contains(change.type) {
                    change.type = .refundReversed
                }
                if change.type == .refund || change.type == .revoke, let taken = Self.takenFromAnother(change, in: report) {
                    return taken
                }
                return DerivedEntitlementEvent(type: change.type, purchase: change.purchase, report: report)
            }
            if var consumable = Self.consumableChange(before: before, after: after) {
                // A refund's debit credited back, with nothing bought: told by Apple's notification, or seen in the
                // ledger's reversal when a refresh or a receipt shows the refund gone.
                let consumables = report.transactions.filter { report.productTypes[$0.transaction.productID] == .consumable }
                let boughtNow = consumables.filter { report.newTransactionIDs.contains($0.transaction.transactionID) }
                let reversed = consumables.filter { report.reversedTransactionIDs.contains($0.transaction.transactionID) }
                if consumable == .consumablePurchase, meaning == .refundReversed || (!reversed.isEmpty && boughtNow.isEmpty) {
                    consumable = .refundReversed
                }
                // About the purchase the change is of: the one reversed, else one bought now, else the newest recorded.
                let named = consumable == .refundReversed && !reversed.isEmpty ? reversed : boughtNow.isEmpty ? consumables : boughtNow
                let bought = named
                    .max { $0.transaction.wasBought(before: $1.transaction) }
                return bought.map { DerivedEntitlementEvent(type: consumable, transaction: $0) } ?? DerivedEntitlementEvent(type: consumable)
            }
            let anyActive = after.entitlements.values.contains(where: \.active)
            return DerivedEntitlementEvent(type: meaning ?? (anyActive ? .renewal : .expiration))
        }
    }

    /// A subscription going on as another product of its group that gives other entitlements ends one claim and
    /// starts another of the same chain: a product change, about the new product; nil when no claim did.
    private static func productSwitch(in changes: [Change]) -> Change? {
        guard let ended = changes.first(where: { $0.type == .expiration }), let chain = ended.purchase?.originalTransactionID else {
            return nil
        }
        return changes.first {
            $0.type != .expiration && $0.purchase?.originalTransactionID == chain && $0.purchase?.productID != ended.purchase?.productID
        }.map { Change(type: .productChange, purchase: $0.purchase) }
    }

    /// A refund (or revoke) of another purchase of the product than the one shown, which stays shown, shortened or
    /// not (the first of two stacked passes refunded): the event about the purchase taken back, as the report's
    /// transactions show it; nil when the report took back the one shown, or no other.
    private static func takenFromAnother(_ change: Change, in report: AppStoreReport) -> DerivedEntitlementEvent? {
        guard let shown = change.purchase else { return nil }
        let cancelled = report.transactions.filter { $0.transaction.cancellationDate != nil }
        guard !cancelled.contains(where: { $0.transaction.originalTransactionID == shown.originalTransactionID }),
              let taken = cancelled.filter({ $0.transaction.productID == shown.productID })
                .max(by: { $0.transaction.wasBought(before: $1.transaction) })
        else { return nil }
        return DerivedEntitlementEvent(type: change.type, transaction: taken)
    }

    /// The App Store purchase a transfer is about: that of the most significant entitlement change it made, one of
    /// the purchases that moved (`moved`, original transaction ids) where one changed something, else any; nil when
    /// only balances or grants changed.
    private static func movedPurchase(before: EntitlementState, after: EntitlementState, among moved: Set<String>) -> AppStorePurchase? {
        let changed = changes(before: before, after: after).filter { $0.purchase != nil }
        let ofMoved = changed.filter { moved.contains($0.purchase!.originalTransactionID) }
        return (ofMoved.isEmpty ? changed : ofMoved).min { $0.rank < $1.rank }?.purchase
    }

    /// The type an App Store Server Notification (V2 `notificationType` and `subtype`, or a V1
    /// `notification_type`) names, for changes the difference alone does not name.
    public static func meaning(ofNotification type: String, subtype: String?) -> EntitlementEventType? {
        switch (type, subtype) {
        case ("SUBSCRIBED", "RESUBSCRIBE"), ("DID_RENEW", _), ("RENEWAL_EXTENDED", _), ("RENEWAL", _),
             ("INTERACTIVE_RENEWAL", _), ("DID_RECOVER", _):
            .renewal
        case ("SUBSCRIBED", _), ("INITIAL_BUY", _), ("OFFER_REDEEMED", _):
            .initialPurchase
        case ("DID_CHANGE_RENEWAL_STATUS", "AUTO_RENEW_DISABLED"):
            .cancellation
        case ("DID_CHANGE_RENEWAL_STATUS", "AUTO_RENEW_ENABLED"):
            .uncancellation
        case ("DID_CHANGE_RENEWAL_STATUS", _):
            nil
        case ("DID_FAIL_TO_RENEW", _):
            .billingIssue
        case ("EXPIRED", _), ("GRACE_PERIOD_EXPIRED", _):
            .expiration
        case ("REFUND", _), ("CANCEL", _):
            .refund
        case ("REFUND_REVERSED", _):
            .refundReversed
        case ("REVOKE", _):
            .revoke
        case ("DID_CHANGE_RENEWAL_PREF", _):
            .productChange
        default:
            nil
        }
    }

    /// The event about one recorded transaction: its product, ids and environment.
    private init(type: EntitlementEventType, transaction owned: OwnedTransaction) {
        self.init(type: type, productID: owned.transaction.productID, transactionID: owned.transaction.transactionID,
                  originalTransactionID: owned.transaction.originalTransactionID, environment: owned.environment)
    }

    /// The event about `purchase` (an App Store purchase; nil for grants), with the newest transaction of
    /// its subscription or product that the report carries: for an event other than a refund or a revoke, the
    /// newest not taken back (a renewal refunded before it started never gave access).
    private init(type: EntitlementEventType, purchase: AppStorePurchase?, report: AppStoreReport?) {
        guard let purchase else {
            self.init(type: type)
            return
        }
        let chain = report?.transactions.map(\.transaction).filter { $0.originalTransactionID == purchase.originalTransactionID } ?? []
        let standing = type == .refund || type == .revoke ? chain : chain.filter { $0.cancellationDate == nil }
        let transaction = (standing.isEmpty ? chain : standing)
            .max { $0.wasBought(before: $1) }
        self.init(type: type, productID: purchase.productID, transactionID: transaction?.transactionID,
                  originalTransactionID: purchase.originalTransactionID, environment: purchase.environment)
    }

    /// One entitlement's change: its type, how much it matters, the purchase it is about, and the App Store purchase
    /// behind the entitlement before.
    private struct Change {
        var type: EntitlementEventType
        var purchase: AppStorePurchase?
        var previous: AppStorePurchase? = nil
        /// The App Store purchase behind an active entitlement gave way to a grant that holds it on.
        var toGrant = false

        /// A change of the purchase behind an active entitlement because the one that gave it was taken back
        /// (refunded, or revoked from a family member) and another took over (of its group, or of the same
        /// product: a second subscription, a stacked pass, the same product bought twice; or a grant): the refund (or revoke)
        /// of the purchase taken back is the event, about it, as the report's transactions of it show; nil when the
        /// purchase before was not taken back, or the one named now was.
        func takenBack(in report: AppStoreReport) -> Change? {
            guard let previous, toGrant || previous.originalTransactionID != purchase?.originalTransactionID else { return nil }
            // Taken back: its newest transaction the report shows (an older renewal refunded long ago is not this).
            let cancelled = { (purchase: AppStorePurchase?) in
                report.transactions.map(\.transaction).filter { $0.originalTransactionID == purchase?.originalTransactionID }
                    .max { $0.wasBought(before: $1) }?.cancellationDate != nil
            }
            guard cancelled(previous), toGrant || !cancelled(purchase) else { return nil }
            return Change(type: previous.ownership == .familyShared ? .revoke : .refund, purchase: previous)
        }

        /// Lower ranks name the event when several entitlements change at once.
        var rank: Int {
            switch type {
            case .refund: 0
            case .revoke: 1
            case .refundReversed: 2
            case .productChange: 3
            case .initialPurchase, .nonConsumablePurchase, .nonRenewingPurchase: 4
            case .renewal: 5
            case .billingIssue: 6
            case .expiration: 7
            case .cancellation: 8
            case .uncancellation: 9
            default: 10
            }
        }
    }

    /// Every entitlement's change, in name order (so equal ranks resolve the same way every time).
    private static func changes(before: EntitlementState, after: EntitlementState) -> [Change] {
        Set(before.entitlements.keys).union(after.entitlements.keys).sorted().compactMap { name in
            change(from: before.entitlements[name], to: after.entitlements[name])
        }
    }

    private static func change(from old: Entitlement?, to new: Entitlement?) -> Change? {
        guard old != new else { return nil }
        let previous = (old?.source).flatMap(appStorePurchase)
        let purchase = (new?.source).flatMap(appStorePurchase) ?? previous
        switch (old, new) {
        case (_, let new?) where new.active:
            guard let old, old.active else { return Change(type: gained(new, after: old), purchase: purchase) }
            if let previous, appStorePurchase(new.source) == nil {
                // A grant holds on what the App Store purchase gave: the purchase ended, or was taken back (`takenBack`).
                return Change(type: .expiration, purchase: previous, previous: previous, toGrant: true)
            }
            // Nothing else changed but the purchase behind it: another purchase of the product (a renewal when
            // it is the same subscription).
            let otherPurchase = previous.map { $0.originalTransactionID != purchase?.originalTransactionID } ?? false
            return Change(type: changedWhileActive(old, new) ?? (otherPurchase ? gained(new, after: nil) : .renewal), purchase: purchase,
                          previous: previous)
        case (let old?, _) where old.active:
            return Change(type: lost(new, after: old), purchase: purchase)
        case (_, let new?):
            // Inactive before (or unknown) and after: Apple's renewal intent told after the end (its EXPIRED
            // notification after the expiration was sent) is that, not a second end; a newly refunded (or revoked)
            // claim, or a renewal that failed (Apple's billing retry starting), is worth its own name.
            if let intent = renewalIntentChange(old, new) { return Change(type: intent, purchase: purchase) }
            return Change(type: withdrawalType(new) ?? (billingRetryStarts(old, new) ? .billingIssue : .expiration), purchase: purchase)
        default:
            return nil
        }
    }

    /// Access that starts (or restarts): a purchase of the product's kind.
    private static func gained(_ new: Entitlement, after old: Entitlement?) -> EntitlementEventType {
        guard case .appStore(let purchase) = new.source else { return .grant }
        if purchase.inGracePeriod || purchase.inBillingRetry { return .billingIssue }
        if let old, case .appStore(let previous) = old.source, previous.originalTransactionID == purchase.originalTransactionID {
            if withdrawalType(old) != nil { return .refundReversed }
            if purchase.productType == .autoRenewable {
                return previous.productID == purchase.productID ? .renewal : .productChange
            }
        }
        switch purchase.productType {
        case .autoRenewable: return .initialPurchase
        case .nonRenewing: return .nonRenewingPurchase
        case .nonConsumable, .consumable: return .nonConsumablePurchase
        }
    }

    /// Access that continues, changed.
    private static func changedWhileActive(_ old: Entitlement, _ new: Entitlement) -> EntitlementEventType? {
        guard case .appStore(let after) = new.source else { return nil }
        guard case .appStore(let before) = old.source else { return gained(new, after: nil) }
        if before.productID != after.productID {
            // Another product of the same subscription (an upgrade, a downgrade, a crossgrade) is a product change;
            // a subscription of its own (another group's, unlocking the same) is a purchase.
            return after.productType == .autoRenewable && before.productType == .autoRenewable
                && before.originalTransactionID == after.originalTransactionID
                ? .productChange : gained(new, after: nil)
        }
        if (!before.inBillingRetry && after.inBillingRetry) || (!before.inGracePeriod && after.inGracePeriod) {
            return .billingIssue
        }
        switch (old.expiresAt, new.expiresAt) {
        case (let earlier?, let later?) where later > earlier:
            return after.productType == .nonRenewing ? .nonRenewingPurchase : .renewal
        case (let later?, let earlier?) where earlier < later:
            return .refund
        default:
            break
        }
        if before.willRenew != after.willRenew { return after.willRenew ? .uncancellation : .cancellation }
        return nil
    }

    /// Access that ends.
    private static func lost(_ new: Entitlement?, after old: Entitlement) -> EntitlementEventType {
        guard let new else { return .revoke }
        if let withdrawn = withdrawalType(new) { return withdrawn }
        if billingRetryStarts(old, new) { return .billingIssue }
        return new.inactiveReason == .revoked ? .grantRevoked : .expiration
    }

    /// Whether Apple's billing retry starts with this change: the App Store purchase after it is in billing
    /// retry, the one before (if any) was not (a renewal failed: `DID_FAIL_TO_RENEW`).
    private static func billingRetryStarts(_ old: Entitlement?, _ new: Entitlement) -> Bool {
        guard case .appStore(let after) = new.source, after.inBillingRetry else { return false }
        guard let old, case .appStore(let before) = old.source else { return true }
        return !before.inBillingRetry
    }

    /// `cancellation` (or `uncancellation`) when auto-renewal is all that changed about an App Store claim; nil
    /// otherwise.
    private static func renewalIntentChange(_ old: Entitlement?, _ new: Entitlement) -> EntitlementEventType? {
        guard let old, case .appStore(let before) = old.source, case .appStore(var after) = new.source,
              before.willRenew != after.willRenew else { return nil }
        let willRenew = after.willRenew
        after.willRenew = before.willRenew
        var unchanged = new
        unchanged.source = .appStore(after)
        return unchanged == old ? (willRenew ? .uncancellation : .cancellation) : nil
    }

    /// For a purchase Apple took back: `refund` (reason `refunded`), or `revoke` (reason `revoked`: Family
    /// Sharing ended for it); nil for anything else (a grant's revocation included).
    private static func withdrawalType(_ entitlement: Entitlement) -> EntitlementEventType? {
        guard case .appStore = entitlement.source else { return nil }
        switch entitlement.inactiveReason {
        case .refunded: return .refund
        case .revoked: return .revoke
        case .expired, .billingRetryEnded, nil: return nil
        }
    }

    /// A balance going up is a purchase, down a refund; a balance first shown at zero was credited and refunded at
    /// once (a refund Apple sent before the purchase had an owner): a refund.
    private static func consumableChange(before: EntitlementState, after: EntitlementState) -> EntitlementEventType? {
        let currencies = Set(before.consumables.keys).union(after.consumables.keys)
        let deltas = currencies.map { (after.consumables[$0] ?? 0) - (before.consumables[$0] ?? 0) }
        if deltas.contains(where: { $0 > 0 }) { return .consumablePurchase }
        if deltas.contains(where: { $0 < 0 }) { return .refund }
        if currencies.contains(where: { before.consumables[$0] == nil }) { return .refund }
        return nil
    }

    private static func appStorePurchase(_ source: EntitlementSource) -> AppStorePurchase? {
        if case .appStore(let purchase) = source { purchase } else { nil }
    }
}
