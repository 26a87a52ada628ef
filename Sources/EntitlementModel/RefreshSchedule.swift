import Foundation

/// When the renewal refresher should re-verify an auto-renewable subscription's latest receipt, so that
/// renewals, cancellations and refunds show up without a client posting anything.
public enum RefreshSchedule {
    /// Active subscriptions are looked at least this often, to catch refunds mid-period.
    public static let activeInterval: TimeInterval = 24 * 3600
    /// Shortly after expiry Apple has usually recorded the renewal.
    public static let afterExpiry: TimeInterval = 60
    /// While a renewal is overdue (billing retry, grace period, or not yet visible), check this often.
    public static let overdueInterval: TimeInterval = 6 * 3600
    /// Apple retries billing for up to 60 days; past that an unrenewed subscription is left alone.
    public static let billingRetryWindow: TimeInterval = 60 * 24 * 3600

    /// The next refresh instant, or nil when the subscription has ended for good.
    public static func next(expiresAt: Date?, willRenew: Bool, inBillingRetry: Bool, gracePeriodExpiresAt: Date?, now: Date) -> Date? {
        guard let expiresAt else { return nil }
        if expiresAt > now {
            return min(expiresAt.addingTimeInterval(afterExpiry), now.addingTimeInterval(activeInterval))
        }
        let stillHoping = willRenew || inBillingRetry || (gracePeriodExpiresAt.map { $0 > now } ?? false)
        guard stillHoping, now.timeIntervalSince(expiresAt) < billingRetryWindow else { return nil }
        var next = now.addingTimeInterval(overdueInterval)
        if let grace = gracePeriodExpiresAt, grace > now { next = min(next, grace.addingTimeInterval(afterExpiry)) }
        return next
    }
}
