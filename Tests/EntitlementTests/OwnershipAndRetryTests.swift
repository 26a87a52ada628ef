import Foundation
import Testing
import EntitlementModel

@Suite struct OwnershipRulesTests {
    @Test func firstPosterClaims() {
        #expect(OwnershipRules.decide(currentOwner: nil, poster: "u1", orderUser: nil, transferOnRestore: false) == .claim(user: "u1"))
    }

    @Test func theOwnerPostingAgainChangesNothing() {
        #expect(OwnershipRules.decide(currentOwner: "u1", poster: "u1", orderUser: nil, transferOnRestore: false) == .unchanged(user: "u1"))
    }

    @Test func anotherUserUnderTransferTakesIt() {
        let decision = OwnershipRules.decide(currentOwner: "u1", poster: "u2", orderUser: nil, transferOnRestore: true)
        #expect(decision == .transfer(from: "u1", to: "u2"))
        #expect(decision.owner == "u2")
    }

    @Test func anotherUserUnderKeepIsAConflict() {
        let decision = OwnershipRules.decide(currentOwner: "u1", poster: "u2", orderUser: nil, transferOnRestore: false)
        #expect(decision == .conflict(owner: "u1", poster: "u2"))
        #expect(decision.owner == nil)
    }

    @Test func anOrderBindsThePurchaseToItsUserWhoeverPosts() {
        #expect(OwnershipRules.decide(currentOwner: nil, poster: "u2", orderUser: "buyer", transferOnRestore: false) == .claim(user: "buyer"))
        #expect(OwnershipRules.decide(currentOwner: "buyer", poster: "u2", orderUser: "buyer", transferOnRestore: false) == .unchanged(user: "buyer"))
        #expect(OwnershipRules.decide(currentOwner: "u2", poster: "u2", orderUser: "buyer", transferOnRestore: false) == .transfer(from: "u2", to: "buyer"))
    }

    /// Under transfer the latest post wins: a claim newer than the post stands (a submission verified late),
    /// an older one moves, and an owner posting again renews their claim. An order's user wins whenever.
    @Test func theLatestPostWins() {
        let earlier = Date(timeIntervalSince1970: 1_000), later = Date(timeIntervalSince1970: 2_000)
        #expect(OwnershipRules.decide(currentOwner: "u2", ownerSince: later, poster: "u1", postedAt: earlier, orderUser: nil,
                                      transferOnRestore: true) == .kept(owner: "u2", poster: "u1"))
        #expect(OwnershipRules.decide(currentOwner: "u2", ownerSince: earlier, poster: "u1", postedAt: later, orderUser: nil,
                                      transferOnRestore: true) == .transfer(from: "u2", to: "u1"))
        #expect(OwnershipRules.decide(currentOwner: "u1", ownerSince: earlier, poster: "u1", postedAt: later, orderUser: nil,
                                      transferOnRestore: true) == .reclaimed(user: "u1"))
        #expect(OwnershipRules.decide(currentOwner: "u1", ownerSince: later, poster: "u1", postedAt: earlier, orderUser: nil,
                                      transferOnRestore: true) == .unchanged(user: "u1"))
        #expect(OwnershipRules.decide(currentOwner: "u2", ownerSince: later, poster: "u1", postedAt: earlier, orderUser: "buyer",
                                      transferOnRestore: false) == .transfer(from: "u2", to: "buyer"))
        // Keep refuses whatever the times.
        #expect(OwnershipRules.decide(currentOwner: "u2", ownerSince: earlier, poster: "u1", postedAt: later, orderUser: nil,
                                      transferOnRestore: false) == .conflict(owner: "u2", poster: "u1"))
    }

    /// A consumable's credit stays where it was made: under transfer it is kept, under keep refused.
    @Test func aConsumableStaysWithItsOwner() {
        let decision = OwnershipRules.decide(currentOwner: "u1", poster: "u2", orderUser: nil, consumable: true, transferOnRestore: true)
        #expect(decision == .kept(owner: "u1", poster: "u2") && decision.owner == "u1")
        #expect(OwnershipRules.decide(currentOwner: "u1", poster: "u2", orderUser: nil, consumable: true, transferOnRestore: false)
                == .conflict(owner: "u1", poster: "u2"))
    }
}

@Suite struct RetryScheduleTests {
    let schedule = RetrySchedule(baseMs: 5_000, maxMs: 600_000)

    @Test func doublesFromTheBaseUpToTheCap() {
        #expect(schedule.delayMs(attempt: 1, jitter: 1) == 5_000)
        #expect(schedule.delayMs(attempt: 2, jitter: 1) == 10_000)
        #expect(schedule.delayMs(attempt: 5, jitter: 1) == 80_000)
        #expect(schedule.delayMs(attempt: 8, jitter: 1) == 600_000)
        #expect(schedule.delayMs(attempt: 1_000, jitter: 1) == 600_000)
    }

    @Test func jitterStaysWithinHalfToFull() {
        #expect(schedule.delayMs(attempt: 3, jitter: 0.5) == 10_000)
        #expect(schedule.delayMs(attempt: 3, jitter: 0) == 10_000)
        #expect(schedule.delayMs(attempt: 3, jitter: 7) == 20_000)
        for _ in 0..<100 {
            let delay = schedule.randomDelayMs(attempt: 2)
            #expect((5_000...10_000).contains(delay))
        }
    }
}
