import Foundation
import Testing
import EntitlementModel

@Suite struct RefreshScheduleTests {
    let now = Date(timeIntervalSince1970: 1_800_000_000)

    @Test func activeSubscriptionsAreCheckedJustAfterExpiryOrDaily() {
        let soon = now.addingTimeInterval(3600)
        #expect(RefreshSchedule.next(expiresAt: soon, willRenew: true, inBillingRetry: false, gracePeriodExpiresAt: nil, now: now) == soon.addingTimeInterval(60))
        let far = now.addingTimeInterval(30 * 86_400)
        #expect(RefreshSchedule.next(expiresAt: far, willRenew: false, inBillingRetry: false, gracePeriodExpiresAt: nil, now: now) == now.addingTimeInterval(86_400))
    }

    @Test func overdueRenewalsAreCheckedEverySixHoursOrAtGraceEnd() {
        let expired = now.addingTimeInterval(-3600)
        #expect(RefreshSchedule.next(expiresAt: expired, willRenew: true, inBillingRetry: true, gracePeriodExpiresAt: nil, now: now) == now.addingTimeInterval(6 * 3600))
        let grace = now.addingTimeInterval(1800)
        #expect(RefreshSchedule.next(expiresAt: expired, willRenew: true, inBillingRetry: true, gracePeriodExpiresAt: grace, now: now) == grace.addingTimeInterval(60))
    }

    @Test func endedSubscriptionsAreLeftAlone() {
        let expired = now.addingTimeInterval(-3600)
        #expect(RefreshSchedule.next(expiresAt: expired, willRenew: false, inBillingRetry: false, gracePeriodExpiresAt: nil, now: now) == nil)
        let longAgo = now.addingTimeInterval(-61 * 86_400)
        #expect(RefreshSchedule.next(expiresAt: longAgo, willRenew: true, inBillingRetry: true, gracePeriodExpiresAt: nil, now: now) == nil)
        #expect(RefreshSchedule.next(expiresAt: nil, willRenew: true, inBillingRetry: false, gracePeriodExpiresAt: nil, now: now) == nil)
    }
}
