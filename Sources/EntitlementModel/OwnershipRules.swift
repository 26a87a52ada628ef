import Foundation

/// Who a purchase belongs to after a user posts a receipt holding it.
public enum OwnershipDecision: Sendable, Equatable {
    /// Nobody owned it: it becomes `user`'s.
    case claim(user: String)
    /// It already belongs to `user`: nothing moves.
    case unchanged(user: String)
    /// It already belongs to `user`, who posted it again after their claim: the claim dates from this post.
    case reclaimed(user: String)
    /// It moves from `from` to `to` (recorded in the audit log).
    case transfer(from: String, to: String)
    /// The policy would move it, but it stays with `owner`: a consumable (its credit may be spent), or a claim
    /// newer than this post (a submission verified late does not take back a later restore).
    case kept(owner: String, poster: String)
    /// It belongs to `owner` and the policy keeps it there: the submission is refused with 409.
    case conflict(owner: String, poster: String)

    /// The user who owns the purchase once the decision is applied (nil for a conflict).
    public var owner: String? {
        switch self {
        case .claim(let user), .unchanged(let user), .reclaimed(let user): user
        case .transfer(_, let to): to
        case .kept(let owner, _): owner
        case .conflict: nil
        }
    }
}

/// The ownership rules of the contract, as a pure function.
public enum OwnershipRules {
    /// Decides one purchase (an `original_transaction_id`).
    ///
    /// - Parameters:
    ///   - currentOwner: the owner recorded now, if any.
    ///   - ownerSince: when the current owner's claim was posted (nil: unknown, no claim is weighed by time).
    ///   - poster: the user who posted the receipt.
    ///   - postedAt: when the poster posted it (nil: unknown, as `ownerSince`). Under the restore policy the
    ///     latest post wins: an owner's claim newer than this post stands.
    ///   - orderUser: the user of the order whose `app_account_token` the purchase carries, if any. An order
    ///     binds the purchase to its user whoever posts it and whenever, whatever the restore policy.
    ///   - consumable: the purchase is a consumable, whose credit stays where it was made.
    ///   - transferOnRestore: `RESTORE_POLICY=transfer`.
    public static func decide(currentOwner: String?, ownerSince: Date? = nil, poster: String, postedAt: Date? = nil,
                              orderUser: String?, consumable: Bool = false, transferOnRestore: Bool) -> OwnershipDecision {
        let intended = orderUser ?? poster
        guard let currentOwner else { return .claim(user: intended) }
        let claimIsNewer = ownerSince.flatMap { since in postedAt.map { since > $0 } } ?? false
        let postIsNewer = ownerSince.flatMap { since in postedAt.map { since < $0 } } ?? false
        if currentOwner == intended {
            return currentOwner == poster && postIsNewer ? .reclaimed(user: currentOwner) : .unchanged(user: currentOwner)
        }
        guard orderUser != nil || transferOnRestore else { return .conflict(owner: currentOwner, poster: poster) }
        if consumable || (orderUser == nil && claimIsNewer) { return .kept(owner: currentOwner, poster: poster) }
        return .transfer(from: currentOwner, to: intended)
    }
}
