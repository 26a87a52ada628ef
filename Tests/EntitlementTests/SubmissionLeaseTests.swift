import EntitlementModel
import Foundation
import Testing
@testable import AppStore
@testable import EntitlementService
@testable import FakeAppStore
@testable import ServiceRuntime

/// Retry leases fenced by their claim: two instances, the first one's lease runs out while it waits for Apple,
/// the second claims the submission, and whatever the first one's late answer says changes nothing. Also the
/// backlog the waiting submissions make, as `/metrics` shows it.
@Suite(.serialized, .timeLimit(.minutes(2)))
@Loop
struct SubmissionLeaseTests {
    /// The late answers an expired lease may bring; each would change the submission if it were written.
    enum LateAnswer: String, CaseIterable, Sendable {
        case verified, rejected, configurationError
    }

    private func purchase() -> FakeReceipt {
        var receipt = FakeReceipt(bundleID: ServiceHarness.bundleID)
        receipt.addPurchase("com.example.lifetime", transactionID: "fence-1", purchased: Date().addingTimeInterval(-60))
        return receipt
    }

    private func answer(_ late: LateAnswer, _ receipt: FakeReceipt) throws -> VerificationFlow.Result {
        switch late {
        case .verified: try receipt.verified()
        case .rejected: .rejected(appleStatus: 21010, detail: "late rejection")
        case .configurationError: .configurationError(appleStatus: 21004, detail: "late configuration error")
        }
    }

    @Test(arguments: LateAnswer.allCases)
    func aLateAnswerUnderAnExpiredLeaseChangesNothing(late: LateAnswer) async throws {
        try await PurchaseStack.run { stack in
            let slowApple = ScriptedVerifier(), otherApple = ScriptedVerifier()
            let first = stack.service(slowApple), second = stack.service(otherApple)
            let receipt = purchase()

            // The first instance stores the receipt under its claim and asks Apple, who keeps it waiting.
            slowApple.holdNextCall()
            let post = Task { @Loop in
                try await first.submit(userID: "fence-user", receiptData: receipt.receiptData, orderID: nil, waitMs: 30_000, actor: "test")
            }
            await slowApple.awaitHeldCall()
            let firstClaim = try #require(try await stack.sql("SELECT claim_id FROM receipt_submissions").first?.uuid("claim_id"))

            // Its lease runs out; the second instance claims the submission, and Apple cannot answer that one now.
            _ = try await stack.sql("UPDATE receipt_submissions SET claimed_until = now() - interval '1 second', next_attempt_at = now()")
            let due = try await second.submissions.claimDue(limit: 10, lease: second.lease, on: stack.pool)
            #expect(due.count == 1 && due.first?.claim.claimID != firstClaim)
            otherApple.enqueue(.retryLater(appleStatus: nil, reason: "HTTP 503"))
            guard case .pending = await second.startRetry(try #require(due.first)).value else {
                Issue.record("the second attempt was not rescheduled"); return
            }
            let state = "SELECT status, apple_status, last_error, claim_id, claimed_until, next_attempt_at, attempts, resolved_at FROM receipt_submissions"
            let rescheduled = try await stack.sql(state)

            // The first attempt's answer arrives: nothing of it is written.
            slowApple.release(try answer(late, receipt))
            let (_, outcome) = try await post.value
            guard case .pending? = outcome else {
                Issue.record("the superseded attempt answered \(String(describing: outcome))"); return
            }
            #expect(try await stack.sql(state).map(\.values) == rescheduled.map(\.values))
            #expect(try await stack.sql("SELECT status FROM receipt_submissions").first?.string("status") == "pending")
            #expect(try await stack.sql("SELECT 1 FROM app_store_transactions UNION ALL SELECT 1 FROM purchase_owners").isEmpty)

            // The holder of the live claim still finishes the submission.
            _ = try await stack.sql("UPDATE receipt_submissions SET next_attempt_at = now()")
            let again = try await second.submissions.claimDue(limit: 10, lease: second.lease, on: stack.pool)
            otherApple.enqueue(try receipt.verified())
            guard case .verified = await second.startRetry(try #require(again.first)).value else {
                Issue.record("the live claim could not verify"); return
            }
            #expect(try await stack.sql("SELECT status FROM receipt_submissions").first?.string("status") == "verified")
            #expect(try await stack.sql("SELECT user_id FROM purchase_owners WHERE original_transaction_id = 'fence-1'").first?.string("user_id") == "fence-user")
        }
    }

    private typealias Post = Task<(id: UUID, outcome: AttemptOutcome?), any Error>

    /// `user` posts `receipt` to `first`, whose call to Apple `slowApple` holds, then to `second`; returns once the
    /// second post has reached the stored submission (a repost stamps `posted_at` anew).
    private func postTwice(_ stack: PurchaseStack, _ first: ReceiptService, _ second: ReceiptService, heldBy slowApple: ScriptedVerifier,
                           _ receipt: FakeReceipt, user: String) async throws -> (Post, Post) {
        slowApple.holdNextCall()
        let post = { (service: ReceiptService) in
            Post { @Loop in try await service.submit(userID: user, receiptData: receipt.receiptData, orderID: nil, waitMs: 30_000, actor: "test") }
        }
        let firstPost = post(first)
        await slowApple.awaitHeldCall()
        let secondPost = post(second)
        #expect(try await eventually(timeout: 10) {
            try await stack.sql("SELECT posted_at > created_at AS reposted FROM receipt_submissions WHERE user_id = $1", [user]).first?
                .bool("reposted") == true
        })
        return (firstPost, secondPost)
    }

    /// The same receipt posted to a second instance while the first asks Apple: the second waits for the first
    /// one's answer (up to its `wait_ms`) and answers as it would have, rather than 202 at once.
    @Test(arguments: LateAnswer.allCases)
    func aSecondInstanceWaitsForTheAnswerOfTheFirst(answer late: LateAnswer) async throws {
        try await PurchaseStack.run { stack in
            let slowApple = ScriptedVerifier(), otherApple = ScriptedVerifier()
            let first = stack.service(slowApple), second = stack.service(otherApple)
            let receipt = purchase()
            let (firstPost, secondPost) = try await postTwice(stack, first, second, heldBy: slowApple, receipt, user: "twice")
            slowApple.release(try answer(late, receipt))
            let (firstID, firstOutcome) = try await firstPost.value
            let (secondID, secondOutcome) = try await secondPost.value
            #expect(firstID == secondID)
            switch (late, firstOutcome, secondOutcome) {
            case (.verified, .verified(.production, 0, _)?, .verified(.production, 0, [])?),
                 (.rejected, .rejected(21010, _)?, .rejected(21010, "late rejection")?),
                 (.configurationError, .configurationError(21004, _)?, .configurationError(21004, "late configuration error")?):
                break
            default:
                Issue.record("first: \(String(describing: firstOutcome)), second: \(String(describing: secondOutcome))")
            }
            #expect(otherApple.calls.isEmpty, "the second instance did not ask Apple itself")
        }
    }

    /// Under `keep`, the second instance's answer is the first one's conflict, naming the purchase.
    @Test func aSecondInstanceAnswersTheFirstOnesConflict() async throws {
        try await PurchaseStack.run { stack in
            let apple = ScriptedVerifier(), slowApple = ScriptedVerifier(), otherApple = ScriptedVerifier()
            let receipt = purchase()
            apple.enqueue(try receipt.verified())
            _ = try await stack.service(apple, restorePolicy: .keep).submit(userID: "owner", receiptData: receipt.receiptData, orderID: nil,
                                                                             waitMs: 30_000, actor: "test")
            let first = stack.service(slowApple, restorePolicy: .keep), second = stack.service(otherApple, restorePolicy: .keep)
            let (firstPost, secondPost) = try await postTwice(stack, first, second, heldBy: slowApple, receipt, user: "other")
            slowApple.release(try receipt.verified())
            guard case .conflict("fence-1")? = try await firstPost.value.outcome, case .conflict("fence-1")? = try await secondPost.value.outcome else {
                Issue.record("both posts end in the conflict over fence-1"); return
            }
        }
    }

    /// The first instance dies while it asks Apple: once its lease runs out, the waiting second instance takes the
    /// submission over and asks Apple itself.
    @Test func aSecondInstanceTakesOverALapsedLease() async throws {
        try await PurchaseStack.run { stack in
            let deadApple = ScriptedVerifier(), otherApple = ScriptedVerifier()
            let receipt = purchase()
            deadApple.holdNextCall()
            let first = stack.service(deadApple)
            let firstPost = Task { @Loop in
                try await first.submit(userID: "lapsed", receiptData: receipt.receiptData, orderID: nil, waitMs: 0, actor: "test")
            }
            await deadApple.awaitHeldCall()
            _ = try await firstPost.value
            otherApple.enqueue(try receipt.verified())
            let waiting = Task { @Loop in
                try await stack.service(otherApple).submit(userID: "lapsed", receiptData: receipt.receiptData, orderID: nil, waitMs: 30_000, actor: "test")
            }
            #expect(try await eventually(timeout: 10) {
                try await stack.sql("SELECT posted_at > created_at AS reposted FROM receipt_submissions").first?.bool("reposted") == true
            })
            _ = try await stack.sql("UPDATE receipt_submissions SET claimed_until = now() - interval '1 second'")
            guard case .verified? = try await waiting.value.outcome else { Issue.record("the lapsed lease was not taken over"); return }
            #expect(otherApple.calls.count == 1)
            deadApple.release(.retryLater(appleStatus: nil, reason: "too late"))
        }
    }

    /// The retry worker starts what it claims and goes on: a retry Apple keeps waiting holds up none that comes
    /// due meanwhile.
    @Test func aSlowRetryHoldsUpNoOtherRetry() async throws {
        try await PurchaseStack.run { stack in
            let apple = ScriptedVerifier()
            let service = stack.service(apple)
            let store = SubmissionStore()
            let due = "UPDATE receipt_submissions SET claimed_until = NULL, next_attempt_at = now() - interval '1 second' WHERE user_id = $1"
            _ = try await store.store(userID: "slow", receiptData: "c2xvdw==", orderID: nil, lease: .seconds(60), on: stack.pool)
            _ = try await stack.sql(due, ["slow"])
            apple.holdNextCall()
            let worker = RetryWorker.make(service: service, intervalMs: 20)
            worker.start()
            await apple.awaitHeldCall()
            _ = try await store.store(userID: "quick", receiptData: "cXVpY2s=", orderID: nil, lease: .seconds(60), on: stack.pool)
            apple.enqueue(.rejected(appleStatus: 21010, detail: "final"))
            _ = try await stack.sql(due, ["quick"])
            #expect(try await eventually(timeout: 10) {
                try await stack.sql("SELECT status FROM receipt_submissions WHERE user_id = 'quick'").first?.string("status") == "invalid"
            })
            apple.release(.rejected(appleStatus: 21010, detail: "final too"))
            await worker.stop()
        }
    }

    @Test func releasingClaimsFreesOnlyTheLeasesStillHeld() async throws {
        try await PurchaseStack.run { stack in
            let store = SubmissionStore()
            let (_, created) = try await store.store(userID: "u1", receiptData: "cmVjZWlwdA==", orderID: nil, lease: .seconds(60), on: stack.pool)
            let held = try #require(created)
            // The lease is taken over (it ran out): releasing the stale claim leaves the new holder's lease alone.
            _ = try await stack.sql("UPDATE receipt_submissions SET claimed_until = now() - interval '1 second'")
            let current = try #require(try await store.claim(held.verificationID, lease: .seconds(60), on: stack.pool))
            try await store.release([held.claim], on: stack.pool)
            #expect(try await stack.sql("SELECT claimed_until IS NOT NULL AS held FROM receipt_submissions").first?.bool("held") == true)
            try await store.release([current.claim], on: stack.pool)
            #expect(try await stack.sql("SELECT claimed_until IS NOT NULL AS held FROM receipt_submissions").first?.bool("held") == false)
            #expect(current.attempts == 2)
        }
    }

    /// The retry backlog's age is how long its oldest waiting submission has waited, never less than 0: not for
    /// one stored a moment ago, nor for one stamped ahead of the database's clock (a clock stepped back).
    @Test func theBacklogsAgeIsTheOldestWaitAndNeverNegative() async throws {
        try await PurchaseStack.run { stack in
            let store = SubmissionStore()
            #expect(try await store.backlog(on: stack.pool) == (0, 0))
            _ = try await store.store(userID: "u1", receiptData: "b2xk", orderID: nil, lease: .seconds(60), on: stack.pool)
            _ = try await store.store(userID: "u2", receiptData: "bmV3", orderID: nil, lease: .seconds(60), on: stack.pool)
            let fresh = try await store.backlog(on: stack.pool)
            #expect(fresh.count == 2 && fresh.oldestAgeSeconds >= 0 && fresh.oldestAgeSeconds < 60)

            _ = try await stack.sql("UPDATE receipt_submissions SET created_at = now() - interval '90 seconds' WHERE user_id = 'u1'")
            let waited = try await store.backlog(on: stack.pool)
            #expect(waited.count == 2 && waited.oldestAgeSeconds >= 90 && waited.oldestAgeSeconds < 150)

            _ = try await stack.sql("UPDATE receipt_submissions SET created_at = now() + interval '1 hour'")
            #expect(try await store.backlog(on: stack.pool) == (2, 0))

            _ = try await stack.sql("UPDATE receipt_submissions SET status = 'verified'")
            #expect(try await store.backlog(on: stack.pool) == (0, 0))
        }
    }

    /// At shutdown a request waiting for Apple goes on waiting (within its own `wait_ms`) for the shutdown's grace:
    /// Apple's answer within it is the request's answer; past it the request is answered pending, and the
    /// verification stays stored for the next attempt.
    @Test func aShutdownLetsWaitingRequestsFinishWithinItsGrace() async throws {
        try await PurchaseStack.run { stack in
            let apple = ScriptedVerifier()
            let service = stack.service(apple)
            let receipt = purchase()
            apple.holdNextCall()
            let answered = Task { @Loop in
                try await service.submit(userID: "grace-user", receiptData: receipt.receiptData, orderID: nil, waitMs: 30_000, actor: "test")
            }
            await apple.awaitHeldCall()
            service.beginShutdown(grace: 60_000)
            apple.release(try receipt.verified())
            guard case .verified? = try await answered.value.outcome else { Issue.record("not answered with Apple's verdict"); return }
            await service.releaseClaims()

            let late = purchase().with { $0.addPurchase("com.example.lifetime", transactionID: "grace-2", purchased: Date()) }
            let cut = stack.service(apple)
            apple.holdNextCall()
            let waiting = Task { @Loop in
                try await cut.submit(userID: "grace-user", receiptData: late.receiptData, orderID: nil, waitMs: 30_000, actor: "test")
            }
            await apple.awaitHeldCall()
            cut.beginShutdown(grace: 50)
            #expect(try await waiting.value.outcome == nil, "answered pending once the grace is over")
            await cut.releaseClaims()
            apple.release(try late.verified())
            #expect(try await stack.sql("SELECT 1 FROM receipt_submissions WHERE status = 'pending'").count == 1)
        }
    }

}
