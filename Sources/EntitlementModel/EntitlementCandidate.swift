import Foundation

/// One source's claim on one entitlement name; the evaluator keeps the best claim per name.
struct EntitlementCandidate {
    var name: String
    var entitlement: Entitlement
    /// When the source began (purchase or grant creation), for tie-breaks.
    var started: Date
    /// The transaction or grant id, the last tie-break.
    var identity: String

    /// Whether this claim is shown rather than `other`. In order: active beats inactive; then the later end
    /// (`expiresAt`, nil = lifetime, beats any date; for inactive claims, the one that ended last); then an App
    /// Store purchase beats a grant, and a purchase beats a family-shared one; then the earlier start; then
    /// the smaller id.
    func outranks(_ other: EntitlementCandidate) -> Bool {
        if entitlement.active != other.entitlement.active { return entitlement.active }
        if entitlement.expiresAt != other.entitlement.expiresAt {
            guard let end = entitlement.expiresAt else { return true }
            guard let otherEnd = other.entitlement.expiresAt else { return false }
            return end > otherEnd
        }
        if sourceRank != other.sourceRank { return sourceRank < other.sourceRank }
        if started != other.started { return started < other.started }
        return identity < other.identity
    }

    /// 0 for a purchase, 1 for a family-shared purchase, 2 for a grant.
    private var sourceRank: Int {
        switch entitlement.source {
        case .appStore(let purchase): purchase.ownership == .purchased ? 0 : 1
        case .grant: 2
        }
    }
}

/// One source's claim on an entitlement, as the customer view lists it: what that source alone would give,
/// and whether it is the claim shown.
public struct EntitlementClaim: Sendable, Hashable {
    /// What this source gives (active or not, until when, and the source itself).
    public var entitlement: Entitlement
    /// The transaction id of an App Store claim (the latest of its chain or stack), the grant id of a grant.
    public var identity: String
    /// True for the claim `GET /v1/users/{user_id}/entitlements` shows; exactly one per name.
    public var shown: Bool

    /// A claim with these values; nothing is checked (exactly one claim per name should be `shown`).
    public init(entitlement: Entitlement, identity: String, shown: Bool) {
        self.entitlement = entitlement
        self.identity = identity
        self.shown = shown
    }
}
