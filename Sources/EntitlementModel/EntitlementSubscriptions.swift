import Foundation

/// The auto-renewable subscription rules of ``EntitlementEvaluator``, one chain (`originalTransactionID`) at a
/// time, then one subscription group at a time.
enum SubscriptionRules {
    /// One subscription (an `originalTransactionID`): where its transactions stand in the evaluator's list and
    /// where their auto-renewable products stand in the catalog. Positions, so that no transaction or product
    /// is copied while the chain is ranked.
    struct Chain {
        var originalTransactionID: String
        var members: [(transaction: Int, product: Int)] = []
    }

    /// The claims of every chain. `chains` hold all known transactions of auto-renewable catalog products,
    /// including ones purchased after `at`.
    static func candidates(
        chains: [Chain], transactions: [OwnedTransaction], renewals: [RenewalInfo], catalog: Catalog, at: Date
    ) -> [EntitlementCandidate] {
        var candidates: [EntitlementCandidate] = []
        var current: [Current] = []
        let renewalsByChain = renewals.count > 8 ? Dictionary(renewals.map { ($0.originalTransactionID, $0) }) { _, last in last } : nil
        for chain in chains {
            let renewal = renewalsByChain.map { $0[chain.originalTransactionID] }
                ?? renewals.last { $0.originalTransactionID == chain.originalTransactionID }
            let outcome = evaluate(chain, transactions: transactions, renewal: renewal, catalog: catalog, at: at)
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
        // A chain that lost its group stays listed, expired from when the winner took over: the winner's purchase,
        // or its own when it was bought while the winner already held the group.
        for live in current {
            guard let group = live.group, let winner = winners[group], winner.lead.identity != live.lead.identity else { continue }
            candidates += live.superseded(from: max(winner.lead.started, live.lead.started))
        }
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

        /// The claims once another chain of the group took over at `end`: inactive (`expired`) from then.
        func superseded(from end: Date) -> [EntitlementCandidate] {
            candidates.map { candidate in
                var claim = candidate
                var source = claim.entitlement.source
                if case .appStore(var purchase) = source {
                    purchase.inGracePeriod = false
                    source = .appStore(purchase)
                }
                claim.entitlement = Entitlement(expiresAt: end, inactiveReason: .expired, source: source)
                return claim
            }
        }
    }

    /// A transaction of the chain that no longer decides anything, and why.
    private struct Ended {
        var member: (transaction: Int, product: Int)
        var end: Date
        var reason: InactiveReason
    }

    /// One chain's claims: `current` when its deciding transaction is active, `past` for everything else. Of
    /// the transactions that no longer decide, only those whose end is the latest for one of their names give
    /// claims: an earlier end never outranks it (see ``EntitlementCandidate/outranks(_:)``), and the chain is
    /// one source.
    private static func evaluate(
        _ chain: Chain, transactions: [OwnedTransaction], renewal: RenewalInfo?, catalog: Catalog, at: Date
    ) -> (current: Current?, past: [EntitlementCandidate]) {
        var ended: [Ended] = []
        var decider: (member: (transaction: Int, product: Int), expires: Date)?
        var renewedLater = false
        for member in chain.members {
            let transaction = transactions[member.transaction].transaction
            guard transaction.purchaseDate <= at else {
                renewedLater = true
                continue
            }
            guard let expires = transaction.expiresDate else { continue }
            if let withdrawn = EntitlementEvaluator.withdrawal(of: transaction, at: at) {
                ended.append(Ended(member: member, end: withdrawn.date, reason: withdrawn.reason))
            } else if let upgraded = upgradeDate(of: transaction, in: chain, transactions: transactions), upgraded <= at {
                ended.append(Ended(member: member, end: min(upgraded, expires), reason: .expired))
            } else if let current = decider, !decides(transaction, expires: expires,
                                                      over: transactions[current.member.transaction].transaction,
                                                      expiring: current.expires) {
                ended.append(Ended(member: member, end: expires, reason: .expired))
            } else {
                if let current = decider { ended.append(Ended(member: current.member, end: current.expires, reason: .expired)) }
                decider = (member, expires)
            }
        }
        let past = latestClaims(ended, transactions: transactions, catalog: catalog)
        guard let decider else { return (nil, past) }
        let owned = transactions[decider.member.transaction]
        let product = catalog.products[decider.member.product]

        // Renewal info describes the subscription now. When a later transaction exists, `at` lies in the past
        // of a renewal that did happen: the subscription was going to renew and was in no billing trouble.
        let renewal = renewedLater ? nil : renewal
        let expires = decider.expires
        let graceEnd = renewal?.gracePeriodExpiresDate.flatMap { $0 > expires ? $0 : nil }
        let accessEnd = graceEnd ?? expires
        var purchase = EntitlementEvaluator.purchase(owned, product: product)
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
        let candidates = product.entitlements.map {
            EntitlementCandidate(name: $0, entitlement: entitlement, started: owned.transaction.purchaseDate,
                                 identity: owned.transaction.transactionID)
        }
        guard entitlement.active, let lead = candidates.first else { return (nil, past + candidates) }
        let group = product.subscriptionGroup ?? owned.transaction.subscriptionGroupIdentifier
        return (Current(group: group, candidates: candidates, lead: lead), past)
    }

    /// Whether `transaction` rather than `other` decides the chain: the later expiry, then the later purchase,
    /// then the larger transaction id.
    private static func decides(_ transaction: StoreTransaction, expires: Date, over other: StoreTransaction,
                                expiring otherExpires: Date) -> Bool {
        (otherExpires, other.purchaseDate, other.transactionID) < (expires, transaction.purchaseDate, transaction.transactionID)
    }

    /// The inactive claims of the transactions that no longer decide: per entitlement name, those that ended
    /// last.
    private static func latestClaims(_ ended: [Ended], transactions: [OwnedTransaction], catalog: Catalog) -> [EntitlementCandidate] {
        var latest: [(name: String, end: Date)] = []
        for claim in ended {
            for name in catalog.products[claim.member.product].entitlements {
                if let position = latest.firstIndex(where: { $0.name == name }) {
                    latest[position].end = max(latest[position].end, claim.end)
                } else {
                    latest.append((name, claim.end))
                }
            }
        }
        var claims: [EntitlementCandidate] = []
        for claim in ended {
            let owned = transactions[claim.member.transaction]
            let product = catalog.products[claim.member.product]
            var entitlement: Entitlement?
            for name in product.entitlements where latest.contains(where: { $0.name == name && $0.end == claim.end }) {
                let shared = entitlement ?? Entitlement(
                    expiresAt: claim.end, inactiveReason: claim.reason,
                    source: .appStore(EntitlementEvaluator.purchase(owned, product: product)))
                entitlement = shared
                claims.append(EntitlementCandidate(name: name, entitlement: shared, started: owned.transaction.purchaseDate,
                                                   identity: owned.transaction.transactionID))
            }
        }
        return claims
    }

    /// Apple's `expiration_intent` for "billing error".
    private static let billingErrorIntent = 2

    /// When an upgraded transaction stopped counting: its cancellation date (Apple's upgrade time) when given,
    /// else the purchase of the next transaction in the chain (the upgrade itself); with neither, its purchase.
    /// A transaction Apple's flag never reached (Get All Subscription Statuses and signed notifications show only
    /// the newest transaction of a subscription) was upgraded when a later transaction of another product began
    /// before its expiry: an upgrade starts at once, where a downgrade or crossgrade waits for the renewal.
    /// Nil for a transaction that was not upgraded.
    private static func upgradeDate(of transaction: StoreTransaction, in chain: Chain, transactions: [OwnedTransaction]) -> Date? {
        // Plain loops over the chain's indices: no transaction is copied, and a chain of n transactions costs
        // n² date comparisons, which lazy filters with key paths made the evaluator's largest cost.
        guard transaction.isUpgraded else {
            guard let expires = transaction.expiresDate else { return nil }
            var upgrade: Date?
            for member in chain.members {
                let purchased = transactions[member.transaction].transaction.purchaseDate
                guard purchased > transaction.purchaseDate, purchased < expires, upgrade.map({ purchased < $0 }) ?? true,
                      transactions[member.transaction].transaction.productID != transaction.productID
                else { continue }
                upgrade = purchased
            }
            return upgrade
        }
        if let cancelled = transaction.cancellationDate { return cancelled }
        var next: Date?
        for member in chain.members {
            let purchased = transactions[member.transaction].transaction.purchaseDate
            if purchased > transaction.purchaseDate, next.map({ purchased < $0 }) ?? true { next = purchased }
        }
        return next ?? transaction.purchaseDate
    }
}
