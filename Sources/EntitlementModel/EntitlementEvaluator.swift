import Foundation

/// An App Store transaction together with the environment whose verification reported it.
public struct OwnedTransaction: Sendable, Hashable {
    /// The transaction; several copies of one `transactionID` may be given (the evaluator keeps the last).
    public var transaction: StoreTransaction
    /// The environment whose verification reported it; it becomes the entitlement's `environment`.
    public var environment: StoreEnvironment

    /// Pairs `transaction` with the environment that reported it.
    public init(_ transaction: StoreTransaction, environment: StoreEnvironment) {
        self.transaction = transaction
        self.environment = environment
    }
}

/// Decides what a user owns at one instant from their App Store transactions, Apple's renewal info, admin
/// grants and the catalog. Pure: the same input always gives the same report.
///
/// The rules:
/// - **Time.** Everything is seen as it stood at `at`: a transaction purchased after `at`, or a grant created
///   after it, does not exist yet; a refund or revocation dated after it has not happened yet.
/// - **Catalog.** A transaction counts through its catalog product (type and entitlements). Products the catalog
///   does not know never grant anything and are listed in ``EntitlementReport/unknownProducts``. Consumables
///   never yield entitlements (balances live in the ledger).
/// - **Duplicates.** A `transactionID` counts once. When it appears more than once the last copy is used, but
///   a cancellation date (the earliest) or `isUpgraded` from any copy is kept.
/// - **Refunds.** A transaction whose `cancellationDate` is at or before `at` (and that is not an upgrade)
///   grants nothing from then on: reason `refunded`, or `revoked` for a family-shared one (Apple's `REVOKE`:
///   Family Sharing ended for it), unless another source still grants the entitlement.
/// - **Auto-renewable subscriptions.** Per `originalTransactionID`, the transactions that still count (purchased
///   by `at`, not refunded, not upgraded away) are ranked by expiry; the latest decides (ties: later purchase,
///   then larger transaction id). An upgraded transaction stops counting at its cancellation date (Apple's
///   upgrade time) or, without one, at the purchase of the next transaction in its chain. The decider is
///   active while `at` is before its expiry; after it, while Apple's `gracePeriodExpiresDate` (when later than
///   the expiry) is after `at`, with `in_grace_period` true and `expires_at` the end of grace. Afterwards it
///   is inactive: `expired` with `in_billing_retry` true while Apple still retries payment, otherwise
///   `billing_retry_ended` when `expirationIntent` is 2 (billing error), otherwise `expired`. `will_renew`,
///   grace and billing retry come from the renewal info, which describes the subscription now: when the chain
///   has a transaction purchased after `at`, `at` lies before a renewal that did happen, so `will_renew` is
///   true and the renewal info is not applied (a grace period in the past cannot be reconstructed). Every
///   other transaction of the chain yields inactive claims (`refunded`, or `expired` when it ran out or was
///   upgraded away), so entitlements of an earlier product stay listed. Transactions without an expiry date
///   grant nothing.
/// - **Subscription groups.** One group (the catalog's `subscription_group`, else the transaction's
///   `subscriptionGroupIdentifier`) never yields two active products: among chains active in a group, the one
///   whose access ends last wins (ties: purchased over family-shared, earlier purchase, smaller transaction
///   id); the others grant nothing at `at` and stay listed as `expired` from when the winner took over (the
///   winner's purchase, or their own when bought while the winner already held the group).
/// - **Non-renewing subscriptions.** Per entitlement, the purchases that grant it are taken in purchase order;
///   each lasts its product's `duration`, starting at the later of its purchase and the end of the previous
///   ones (stacking). Refunded ones are left out of the stack (and shown `refunded` or `revoked` if nothing else
///   is left).
///   Active until the end of the stack, then `expired`.
/// - **Non-consumables.** Lifetime (`expires_at` nil) unless refunded.
/// - **Family Sharing.** The transaction's `ownership` is reported as is; its revocation is `revoked`.
/// - **Grants.** Active while not revoked and either lifetime or before `expiresAt`; otherwise inactive with
///   whichever of `revoked` and `expired` happened first (`revoked` on a tie).
/// - **Several sources for one name.** The claim that lasts longest is shown: active beats inactive, then the
///   later end wins (lifetime beats any date; among inactive claims, the one that ended last). Ties go to an
///   App Store purchase over a family-shared one over a grant, then to the earlier purchase or grant, then to
///   the smaller transaction or grant id. So a grant never shortens a store purchase.
/// - **Inactive entitlements** report, in `expires_at`, when access ended (expiry, end of grace, refund or
///   revocation).
public enum EntitlementEvaluator {
    /// What the user owns at `at`. `renewals` are matched to subscriptions by `originalTransactionID` (the last
    /// one given wins); `grants` should be the user's own.
    public static func evaluate(
        transactions: [OwnedTransaction], renewals: [RenewalInfo], grants: [Grant], catalog: Catalog, at: Date
    ) -> EntitlementReport {
        let (candidates, unknownProducts) = candidates(
            transactions: transactions, renewals: renewals, grants: grants, catalog: catalog, at: at)
        var best: [String: EntitlementCandidate] = [:]
        for candidate in candidates {
            if let current = best[candidate.name], !candidate.outranks(current) { continue }
            best[candidate.name] = candidate
        }
        var report = EntitlementReport(asOf: at, entitlements: best.mapValues(\.entitlement),
                                       unknownProducts: unknownProducts.sorted())
        report.nextInputChange = nextInputDate(transactions: transactions, renewals: renewals, grants: grants, after: at)
        return report
    }

    /// Each source's claim on each entitlement name at `at` (the same input as
    /// ``evaluate(transactions:renewals:grants:catalog:at:)``): per name, the best claim of every purchase (an
    /// `original_transaction_id`) and every grant, best first, so the first is the one `evaluate` shows.
    public static func claims(
        transactions: [OwnedTransaction], renewals: [RenewalInfo], grants: [Grant], catalog: Catalog, at: Date
    ) -> [String: [EntitlementClaim]] {
        let candidates = candidates(transactions: transactions, renewals: renewals, grants: grants, catalog: catalog, at: at).candidates
        return Dictionary(grouping: candidates, by: \.name).mapValues { claims in
            var bestPerSource: [String: EntitlementCandidate] = [:]
            for claim in claims {
                let source: String
                switch claim.entitlement.source {
                case .appStore(let purchase): source = "app_store:" + purchase.originalTransactionID
                case .grant(let id, _): source = "grant:" + id
                }
                if let current = bestPerSource[source], !claim.outranks(current) { continue }
                bestPerSource[source] = claim
            }
            return bestPerSource.values.sorted { $0.outranks($1) }.enumerated().map { index, candidate in
                EntitlementClaim(entitlement: candidate.entitlement, identity: candidate.identity, shown: index == 0)
            }
        }
    }

    /// Every claim the input makes at `at`, and the purchased products the catalog does not know.
    private static func candidates(
        transactions: [OwnedTransaction], renewals: [RenewalInfo], grants: [Grant], catalog: Catalog, at: Date
    ) -> (candidates: [EntitlementCandidate], unknownProducts: Set<String>) {
        let transactions = distinct(transactions)
        var unknownProducts = Set<String>()
        var chains = ChainGrouping()
        var nonRenewing: [(transaction: Int, product: Int)] = []
        var candidates: [EntitlementCandidate] = []

        for index in transactions.indices {
            let transaction = transactions[index].transaction
            guard let position = catalog.position(of: transaction.productID) else {
                if transaction.purchaseDate <= at { unknownProducts.insert(transaction.productID) }
                continue
            }
            switch catalog.products[position].type {
            case .autoRenewable:
                // Later transactions stay in the chain: they tell the rules that a renewal did follow.
                chains.add((index, position), to: transaction.originalTransactionID)
            case .nonRenewing where transaction.purchaseDate <= at:
                nonRenewing.append((index, position))
            case .nonConsumable where transaction.purchaseDate <= at:
                candidates += nonConsumableCandidates(transactions[index], product: catalog.products[position], at: at)
            case .consumable, .nonRenewing, .nonConsumable:
                break
            }
        }

        candidates += SubscriptionRules.candidates(
            chains: chains.chains, transactions: transactions, renewals: renewals, catalog: catalog, at: at)
        candidates += nonRenewingCandidates(nonRenewing, transactions: transactions, catalog: catalog, at: at)
        candidates += grants.compactMap { grantCandidate($0, at: at) }
        return (candidates, unknownProducts)
    }

    /// Transactions grouped into subscription chains by `originalTransactionID`: by comparison while there are
    /// few chains (a user has one or two), through a dictionary beyond.
    private struct ChainGrouping {
        var chains: [SubscriptionRules.Chain] = []
        private var positions: [String: Int]?

        mutating func add(_ member: (transaction: Int, product: Int), to originalTransactionID: String) {
            if let position = position(of: originalTransactionID) {
                chains[position].members.append(member)
                return
            }
            positions?[originalTransactionID] = chains.count
            chains.append(SubscriptionRules.Chain(originalTransactionID: originalTransactionID, members: [member]))
            if positions == nil, chains.count > 8 {
                positions = Dictionary(uniqueKeysWithValues: chains.indices.map { (chains[$0].originalTransactionID, $0) })
            }
        }

        private func position(of originalTransactionID: String) -> Int? {
            if let positions { return positions[originalTransactionID] }
            return chains.firstIndex { $0.originalTransactionID == originalTransactionID }
        }
    }

    /// The earliest date after `at` carried by the input itself (a purchase, refund, expiry, end of grace,
    /// grant or revocation still to come): the evaluation may change then even if no entitlement ends.
    private static func nextInputDate(transactions: [OwnedTransaction], renewals: [RenewalInfo], grants: [Grant],
                                      after at: Date) -> Date? {
        var next: Date?
        func consider(_ date: Date?) {
            guard let date, date > at else { return }
            next = min(next ?? date, date)
        }
        for owned in transactions {
            consider(owned.transaction.purchaseDate)
            consider(owned.transaction.cancellationDate)
            consider(owned.transaction.expiresDate)
        }
        for renewal in renewals { consider(renewal.gracePeriodExpiresDate) }
        for grant in grants {
            consider(grant.createdAt)
            consider(grant.expiresAt)
            consider(grant.revokedAt)
        }
        return next
    }

    /// Each `transactionID` once: the last copy, keeping the earliest cancellation and any upgrade flag.
    /// The input itself when no id repeats (the usual case), which costs no copy.
    static func distinct(_ transactions: [OwnedTransaction]) -> [OwnedTransaction] {
        guard repeatsAnID(transactions) else { return transactions }
        var order: [String] = []
        var copies: [String: OwnedTransaction] = [:]
        for owned in transactions {
            let id = owned.transaction.transactionID
            guard let earlier = copies[id] else {
                order.append(id)
                copies[id] = owned
                continue
            }
            var merged = owned
            merged.transaction.cancellationDate =
                [earlier.transaction.cancellationDate, owned.transaction.cancellationDate].compactMap { $0 }.min()
            merged.transaction.isUpgraded = earlier.transaction.isUpgraded || owned.transaction.isUpgraded
            copies[id] = merged
        }
        return order.compactMap { copies[$0] }
    }

    /// Whether two transactions share a `transactionID`: pairwise for a few (no hashing, no allocation), with
    /// a set beyond.
    private static func repeatsAnID(_ transactions: [OwnedTransaction]) -> Bool {
        guard transactions.count > 16 else {
            for later in transactions.indices.dropFirst() {
                for earlier in 0..<later
                where transactions[earlier].transaction.transactionID == transactions[later].transaction.transactionID {
                    return true
                }
            }
            return false
        }
        var seen = Set<String>(minimumCapacity: transactions.count)
        return transactions.indices.contains { !seen.insert(transactions[$0].transaction.transactionID).inserted }
    }

    /// The App Store details of a purchase that is not a live subscription.
    static func purchase(_ owned: OwnedTransaction, product: Product) -> AppStorePurchase {
        AppStorePurchase(
            productID: product.productID, productType: product.type, environment: owned.environment,
            ownership: owned.transaction.ownership, originalTransactionID: owned.transaction.originalTransactionID)
    }

    /// When and why Apple took the transaction back, when that has happened by `at`: `revoked` for a
    /// family-shared one (Family Sharing ended for it: Apple's `REVOKE`), `refunded` otherwise.
    static func withdrawal(of transaction: StoreTransaction, at: Date) -> (date: Date, reason: InactiveReason)? {
        guard !transaction.isUpgraded, let cancelled = transaction.cancellationDate, cancelled <= at else {
            return nil
        }
        return (cancelled, transaction.ownership == .familyShared ? .revoked : .refunded)
    }

    private static func nonConsumableCandidates(
        _ owned: OwnedTransaction, product: Product, at: Date
    ) -> [EntitlementCandidate] {
        let withdrawn = withdrawal(of: owned.transaction, at: at)
        let entitlement = Entitlement(expiresAt: withdrawn?.date, inactiveReason: withdrawn?.reason,
                                      source: .appStore(purchase(owned, product: product)))
        return product.entitlements.map {
            EntitlementCandidate(name: $0, entitlement: entitlement, started: owned.transaction.purchaseDate,
                                 identity: owned.transaction.transactionID)
        }
    }

    private static func nonRenewingCandidates(
        _ purchases: [(transaction: Int, product: Int)], transactions: [OwnedTransaction], catalog: Catalog, at: Date
    ) -> [EntitlementCandidate] {
        var byName: [String: [(transaction: Int, product: Int)]] = [:]
        for purchase in purchases {
            for name in catalog.products[purchase.product].entitlements { byName[name, default: []].append(purchase) }
        }
        var candidates: [EntitlementCandidate] = []
        for (name, purchases) in byName {
            let ordered = purchases.sorted {
                let (first, second) = (transactions[$0.transaction].transaction, transactions[$1.transaction].transaction)
                return first.wasBought(before: second)
            }
            var stack: (end: Date, last: (transaction: Int, product: Int))?
            for member in ordered {
                let owned = transactions[member.transaction]
                let product = catalog.products[member.product]
                if let withdrawn = withdrawal(of: owned.transaction, at: at) {
                    candidates.append(EntitlementCandidate(
                        name: name,
                        entitlement: Entitlement(expiresAt: withdrawn.date, inactiveReason: withdrawn.reason,
                                                 source: .appStore(purchase(owned, product: product))),
                        started: owned.transaction.purchaseDate, identity: owned.transaction.transactionID))
                    continue
                }
                // A validated catalog gives every non-renewing product a duration.
                guard let duration = product.duration else { continue }
                let start = max(owned.transaction.purchaseDate, stack?.end ?? owned.transaction.purchaseDate)
                stack = (duration.adding(to: start), member)
            }
            if let stack {
                let last = transactions[stack.last.transaction]
                candidates.append(EntitlementCandidate(
                    name: name,
                    entitlement: Entitlement(expiresAt: stack.end, inactiveReason: at < stack.end ? nil : .expired,
                                             source: .appStore(purchase(last, product: catalog.products[stack.last.product]))),
                    started: last.transaction.purchaseDate, identity: last.transaction.transactionID))
            }
        }
        return candidates
    }

    private static func grantCandidate(_ grant: Grant, at: Date) -> EntitlementCandidate? {
        guard grant.createdAt <= at else { return nil }
        let revoked = grant.revokedAt.flatMap { $0 <= at ? $0 : nil }
        let expired = grant.expiresAt.flatMap { $0 <= at ? $0 : nil }
        let entitlement: Entitlement
        let source = EntitlementSource.grant(id: grant.id, reason: grant.reason)
        if let revoked, expired.map({ revoked <= $0 }) ?? true {
            entitlement = Entitlement(expiresAt: revoked, inactiveReason: .revoked, source: source)
        } else if let expired {
            entitlement = Entitlement(expiresAt: expired, inactiveReason: .expired, source: source)
        } else {
            entitlement = Entitlement(expiresAt: grant.expiresAt, inactiveReason: nil, source: source)
        }
        return EntitlementCandidate(name: grant.entitlement, entitlement: entitlement, started: grant.createdAt,
                                    identity: grant.id)
    }
}
