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
