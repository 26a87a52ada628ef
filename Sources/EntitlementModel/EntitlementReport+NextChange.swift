import Foundation

extension EntitlementReport {
    /// The earliest instant after ``asOf`` at which this report can change with time alone: the first end of
    /// an active entitlement (an expiry, the end of a grace period or a pass, a grant's end), or an earlier
    /// date the evaluated data carries (a purchase, refund or grant dated after ``asOf``). Nil when nothing is
    /// due. Until then, evaluating the same data again gives the same entitlements; at an active
    /// entitlement's end an `expiration` is due without any message from Apple.
    public var nextChange: Date? {
        let ends = entitlements.values.lazy.filter(\.active).compactMap(\.expiresAt).filter { $0 > asOf }.min()
        return [ends, nextInputChange].compactMap { $0 }.min()
    }
}
