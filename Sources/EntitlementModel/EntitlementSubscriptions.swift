import Foundation

/// The auto-renewable subscription rules of ``EntitlementEvaluator``, one chain (`originalTransactionID`) at a
/// time, then one subscription group at a time.
enum SubscriptionRules {
    /// The claims of every chain. `chains` hold all known transactions of auto-renewable catalog products,
    /// including ones purchased after `at`.
    static func candidates(
        chains: [String: [OwnedTransaction]], renewals: [String: RenewalInfo], catalog: Catalog, at: Date
    ) -> [EntitlementCandidate] {
        var candidates: [EntitlementCandidate] = []
        var current: [Current] = []
        for (originalID, chain) in chains {
            let outcome = evaluate(chain: chain, renewal: renewals[originalID], catalog: catalog, at: at)
            candidates += outcome.past
            if let live = outcome.current { current.append(live) }
        }

        var winners: [String: Current] = [:]
        for live in current {
            guard let group = live.group else {
                candidates += live.candidates
                continue
            }
            if let winner = winners[group], !live.outranks(winner) { continue }
            winners[group] = live
        }
        for winner in winners.values { candidates += winner.candidates }
        return candidates
    }

    /// A chain whose deciding transaction is active at `at`.
    struct Current {
        /// The subscription group: the catalog's `subscription_group`, else the transaction's own.
        var group: String?
        var candidates: [EntitlementCandidate]
        /// The first claim, which carries the end, ownership, start and id shared by all of them.
        var lead: EntitlementCandidate

        /// Within one group, the chain that ends last wins; ties go as for any two claims.
        func outranks(_ other: Current) -> Bool { lead.outranks(other.lead) }
    }

    /// One chain's claims: `current` when its deciding transaction is active, `past` for everything else.
    private static func evaluate(
        chain: [OwnedTransaction], renewal: RenewalInfo?, catalog: Catalog, at: Date
    ) -> (current: Current?, past: [EntitlementCandidate]) {
        var past: [EntitlementCandidate] = []
        var counting: [(owned: OwnedTransaction, expires: Date, product: Product)] = []
        for owned in chain {
            let transaction = owned.transaction
            guard transaction.purchaseDate <= at, let expires = transaction.expiresDate,
                  let product = catalog.product(transaction.productID)
            else { continue }
            if let withdrawn = EntitlementEvaluator.withdrawal(of: transaction, at: at) {
                past += claims(owned, product: product, end: withdrawn.date, reason: withdrawn.reason)
            } else if let upgraded = upgradeDate(of: transaction, in: chain), upgraded <= at {
                past += claims(owned, product: product, end: min(upgraded, expires), reason: .expired)
            } else {
                counting.append((owned, expires, product))
            }
        }
        let ordered = counting.sorted {
            ($0.expires, $0.owned.transaction.purchaseDate, $0.owned.transaction.transactionID)
                < ($1.expires, $1.owned.transaction.purchaseDate, $1.owned.transaction.transactionID)
        }
        guard let decider = ordered.last else { return (nil, past) }
        for earlier in ordered.dropLast() {
            past += claims(earlier.owned, product: earlier.product, end: earlier.expires, reason: .expired)
        }

        // Renewal info describes the subscription now. When a later transaction exists, `at` lies in the past
        // of a renewal that did happen: the subscription was going to renew and was in no billing trouble.
        let renewedLater = chain.contains { $0.transaction.purchaseDate > at }
        let renewal = renewedLater ? nil : renewal
        let expires = decider.expires
        let graceEnd = renewal?.gracePeriodExpiresDate.flatMap { $0 > expires ? $0 : nil }
        let accessEnd = graceEnd ?? expires
        var purchase = EntitlementEvaluator.purchase(decider.owned, product: decider.product)
        purchase.willRenew = renewedLater || renewal?.willRenew == true

        let entitlement: Entitlement
        if at < expires {
            entitlement = Entitlement(expiresAt: expires, inactiveReason: nil, source: .appStore(purchase))
        } else if at < accessEnd {
            purchase.inGracePeriod = true
            purchase.inBillingRetry = renewal?.isInBillingRetryPeriod == true
            entitlement = Entitlement(expiresAt: accessEnd, inactiveReason: nil, source: .appStore(purchase))
        } else {
            purchase.inBillingRetry = renewal?.isInBillingRetryPeriod == true
            let retryEnded = !purchase.inBillingRetry && renewal?.expirationIntent == billingErrorIntent
            entitlement = Entitlement(expiresAt: accessEnd, inactiveReason: retryEnded ? .billingRetryEnded : .expired,
                                      source: .appStore(purchase))
        }
        let candidates = decider.product.entitlements.map {
            EntitlementCandidate(name: $0, entitlement: entitlement, started: decider.owned.transaction.purchaseDate,
                                 identity: decider.owned.transaction.transactionID)
        }
        guard entitlement.active, let lead = candidates.first else { return (nil, past + candidates) }
        let group = decider.product.subscriptionGroup ?? decider.owned.transaction.subscriptionGroupIdentifier
        return (Current(group: group, candidates: candidates, lead: lead), past)
    }

    /// Apple's `expiration_intent` for "billing error".
    private static let billingErrorIntent = 2

    /// When an upgraded transaction stopped counting: its cancellation date (Apple's upgrade time) when given,
    /// else the purchase of the next transaction in the chain (the upgrade itself); with neither, its purchase.
    /// A transaction Apple's flag never reached (Get All Subscription Statuses and signed notifications show only
    /// the newest transaction of a subscription) was upgraded when a later transaction of another product began
    /// before its expiry: an upgrade starts at once, where a downgrade or crossgrade waits for the renewal.
    /// Nil for a transaction that was not upgraded.
    private static func upgradeDate(of transaction: StoreTransaction, in chain: [OwnedTransaction]) -> Date? {
        // Plain loops over the chain's indices: no transaction is copied, and a chain of n transactions costs
        // n² date comparisons, which lazy filters with key paths made the evaluator's largest cost.
        guard transaction.isUpgraded else {
            guard let expires = transaction.expiresDate else { return nil }
            var upgrade: Date?
            for index in chain.indices {
                let purchased = chain[index].transaction.purchaseDate
                guard purchased > transaction.purchaseDate, purchased < expires, upgrade.map({ purchased < $0 }) ?? true,
                      chain[index].transaction.productID != transaction.productID
                else { continue }
                upgrade = purchased
            }
            return upgrade
        }
        if let cancelled = transaction.cancellationDate { return cancelled }
        var next: Date?
        for index in chain.indices {
            let purchased = chain[index].transaction.purchaseDate
            if purchased > transaction.purchaseDate, next.map({ purchased < $0 }) ?? true { next = purchased }
        }
        return next ?? transaction.purchaseDate
    }

    /// Inactive claims for a transaction that no longer decides anything.
    private static func claims(
        _ owned: OwnedTransaction, product: Product, end: Date, reason: InactiveReason
    ) -> [EntitlementCandidate] {
        let entitlement = Entitlement(expiresAt: end, inactiveReason: reason,
                                      source: .appStore(EntitlementEvaluator.purchase(owned, product: product)))
        return product.entitlements.map {
            EntitlementCandidate(name: $0, entitlement: entitlement, started: owned.transaction.purchaseDate,
                                 identity: owned.transaction.transactionID)
        }
    }
}
