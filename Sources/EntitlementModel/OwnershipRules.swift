/// Who a purchase belongs to after a user posts a receipt holding it.
public enum OwnershipDecision: Sendable, Equatable {
    /// Nobody owned it: it becomes `user`'s.
    case claim(user: String)
    /// It already belongs to `user`: nothing moves.
    case unchanged(user: String)
    /// It moves from `from` to `to` (recorded in the audit log).
    case transfer(from: String, to: String)
    /// It belongs to `owner` and the policy keeps it there: the submission is refused with 409.
    case conflict(owner: String, poster: String)

    /// The user who owns the purchase once the decision is applied (nil for a conflict).
    public var owner: String? {
        switch self {
        case .claim(let user), .unchanged(let user): user
        case .transfer(_, let to): to
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
    ///   - poster: the user who posted the receipt.
    ///   - orderUser: the user of the order whose `app_account_token` the purchase carries, if any. An order
    ///     binds the purchase to its user whoever posts it, whatever the restore policy.
    ///   - transferOnRestore: `RESTORE_POLICY=transfer`.
    public static func decide(currentOwner: String?, poster: String, orderUser: String?, transferOnRestore: Bool) -> OwnershipDecision {
        let intended = orderUser ?? poster
        guard let currentOwner else { return .claim(user: intended) }
        if currentOwner == intended { return .unchanged(user: currentOwner) }
        if orderUser != nil || transferOnRestore { return .transfer(from: currentOwner, to: intended) }
        return .conflict(owner: currentOwner, poster: poster)
    }
}
