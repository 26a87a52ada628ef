import AppStore
import ServiceRuntime
import EntitlementModel
import Foundation

/// How one verification attempt of a stored submission ended.
enum AttemptOutcome: Sendable {
    case verified(environment: StoreEnvironment, appleStatus: Int, transferredFrom: [String])
    case rejected(appleStatus: Int?, detail: String)
    /// Under `keep`: this purchase (an original transaction id) belongs to another user.
    case conflict(originalTransactionID: String)
    case configurationError(appleStatus: Int?, detail: String)
    /// No final answer yet; the submission is queued for a background retry.
    case pending
}

/// Receipt submissions from post to final answer: stored before Apple is asked, verified under a lease,
/// recorded in one transaction, rescheduled with backoff when Apple could not answer. Identical submissions
/// in flight share one attempt, in this process through `inFlight` and across processes through the lease;
/// every write of an attempt is fenced by its claim, so one whose lease ran out and was taken over changes
/// nothing when it finishes.
@Loop
final class ReceiptService {
    let db: PostgresPool
    let submissions = SubmissionStore()
    let recorder: PurchaseRecorder
    let catalog: CatalogCache
    let verifier: any ReceiptVerifier
    let retry: RetrySchedule
    /// How long one attempt may hold a submission before another instance may take it over.
    let lease: Duration
    /// The attempts this process runs, by verification id, with the claim each holds.
    private var inFlight: [UUID: (task: Task<AttemptOutcome, Never>, claim: SubmissionClaim)] = [:]
    /// Requests waiting for an attempt, each with the closure that ends its wait (at shutdown).
    private var waiters: [Int: @Loop () -> Void] = [:]
    private var lastWaiter = 0
    /// Once shutting down: when (on the loop's clock) the waits still going end, and the timer that ends them.
    private var waitsEndAt: UInt64?
    private var shutdownTimer: LoopTimer?
    private var shuttingDown: Bool { waitsEndAt != nil }

    /// How long, at shutdown, requests waiting for Apple may go on waiting (each within its own `wait_ms`) before
    /// they are answered 202: Apple usually answers within it, so a deploy rarely turns a purchase's 200 into a 202.
    static let shutdownGraceMs: UInt64 = 10_000

    init(db: PostgresPool, catalog: CatalogCache, verifier: any ReceiptVerifier, restorePolicy: RestorePolicy,
         retry: RetrySchedule, appleTimeoutMs: Int, events: EventRecorder) {
        self.db = db
        recorder = PurchaseRecorder(db: db, restorePolicy: restorePolicy, events: events)
        self.catalog = catalog
        self.verifier = verifier
        self.retry = retry
        // A flow sends at most `VerificationFlow.maxRequests` requests, plus room to record.
        lease = .milliseconds(appleTimeoutMs * VerificationFlow.maxRequests + 5_000)
    }

    /// Stores a posted receipt and waits up to `waitMs` for its verification; nil when it is still pending then.
    func submit(userID: String, receiptData: String, orderID: UUID?, waitMs: Int, actor: String) async throws -> (id: UUID, outcome: AttemptOutcome?) {
        let (id, created) = try await submissions.store(userID: userID, receiptData: receiptData, orderID: orderID, lease: lease, on: db)
        let task: Task<AttemptOutcome, Never>
        if let running = inFlight[id] {
            task = running.task
        } else if let claimed = created {
            task = start(claimed, actor: actor)
        } else if let claimed = try await submissions.claim(id, lease: lease, on: db) {
            task = start(claimed, actor: actor)
        } else {
            return (id, try await outcomeOfAnotherAttempt(id, waitMs: waitMs, actor: actor))
        }
        return (id, await value(of: task, waitingAtMost: waitMs))
    }

    /// The outcome of the attempt another process makes on submission `id` (the same receipt posted there at the
    /// same time), waiting up to `waitMs` for it by reading the submission's row, every 25 ms at first, then less
    /// often (up to 400 ms). A lease that runs out meanwhile (its process died) is taken over: this process asks
    /// Apple. nil when no answer came in time (the client polls `GET /v1/receipts/{id}`).
    private func outcomeOfAnotherAttempt(_ id: UUID, waitMs: Int, actor: String) async throws -> AttemptOutcome? {
        let deadline = EventLoop.shared.now + UInt64(max(0, waitMs))
        let left = { deadline - min(deadline, EventLoop.shared.now) }
        var pause: UInt64 = 25
        while !shuttingDown {
            if let running = inFlight[id] { return await value(of: running.task, waitingAtMost: Int(left())) }
            switch try await submissions.attemptState(id, on: db) {
            case nil, .held?:
                break
            case .lapsed?:
                if let claimed = try await submissions.claim(id, lease: lease, on: db) {
                    return await value(of: start(claimed, actor: actor), waitingAtMost: Int(left()))
                }
            case .settled(let status, let appleStatus, let environment, let detail)?:
                return Self.outcome(status, appleStatus: appleStatus, environment: environment, detail: detail)
            }
            guard left() > 0 else { return nil }
            await LoopTimer.sleep(milliseconds: min(pause, left()))
            pause = min(pause * 2, 400)
        }
        return nil
    }

    /// What an attempt that ended in `status` answered, read back from its submission.
    private static func outcome(_ status: SubmissionStatus, appleStatus: Int?, environment: StoreEnvironment?, detail: String?) -> AttemptOutcome {
        switch status {
        case .verified:
            return .verified(environment: environment ?? .production, appleStatus: appleStatus ?? 0, transferredFrom: [])
        case .invalid:
            if let detail, let purchase = conflictedPurchase(detail) { return .conflict(originalTransactionID: purchase) }
            return .rejected(appleStatus: appleStatus, detail: detail ?? "The App Store rejected the receipt.")
        case .failed:
            return .configurationError(appleStatus: appleStatus, detail: detail ?? "")
        case .pending:
            return .pending
        }
    }

    /// The detail a submission refused under `keep` is stored with (the status says `invalid` only), naming the
    /// purchase that belongs to another user; ``conflictedPurchase(_:)`` reads it back.
    private static func conflictDetail(_ originalTransactionID: String) -> String {
        conflictPrefix + originalTransactionID + conflictSuffix
    }

    /// The purchase a stored ``conflictDetail(_:)`` names; nil for any other detail.
    private static func conflictedPurchase(_ detail: String) -> String? {
        guard detail.hasPrefix(conflictPrefix), detail.hasSuffix(conflictSuffix) else { return nil }
        return String(detail.dropFirst(conflictPrefix.count).dropLast(conflictSuffix.count))
    }

    private static let conflictPrefix = "purchase ", conflictSuffix = " belongs to another user"

    /// Starts one attempt of a submission claimed by the retry worker (counted in ``inFlightCount`` at once), or
    /// finds the one this process runs already.
    @discardableResult
    func startRetry(_ submission: ClaimedSubmission) -> Task<AttemptOutcome, Never> {
        inFlight[submission.verificationID]?.task ?? start(submission, actor: "retry-worker")
    }

    private func start(_ submission: ClaimedSubmission, actor: String) -> Task<AttemptOutcome, Never> {
        let task = Task.onLoop {
            let outcome = await self.attempt(submission, actor: actor)
            self.inFlight[submission.verificationID] = nil
            return outcome
        }
        inFlight[submission.verificationID] = (task, submission.claim)
        return task
    }

    private func attempt(_ submission: ClaimedSubmission, actor: String) async -> AttemptOutcome {
        let id = submission.verificationID, claim = submission.claim
        let result = await verifier.verify(receiptData: submission.receiptData, firstEnvironment: .production)
        do {
            switch result {
            case .verified(let response, let environment):
                do {
                    let recorded = try await recorder.record(
                        response, environment: environment,
                        context: .init(poster: submission.userID, movesOwnership: true, actor: actor, claim: claim, orderID: submission.orderID))
                    Log.info("receipt_verified", ["verification_id": id.lowercasedString, "user_id": submission.userID, "environment": environment.rawValue,
                                                  "apple_status": response.status, "new_transactions": recorded.newTransactions])
                    count("verified", appleStatus: response.status)
                    return .verified(environment: environment, appleStatus: response.status, transferredFrom: recorded.transferredFrom)
                } catch let conflict as OwnershipConflict {
                    try await written(submissions.reject(claim, appleStatus: response.status,
                                                         detail: Self.conflictDetail(conflict.originalTransactionID), on: db), claim)
                    Log.info("receipt_conflict", ["verification_id": id.lowercasedString, "user_id": submission.userID,
                                                  "original_transaction_id": conflict.originalTransactionID])
                    count("conflict", appleStatus: response.status)
                    return .conflict(originalTransactionID: conflict.originalTransactionID)
                }
            case .rejected(let appleStatus, let detail):
                try await written(submissions.reject(claim, appleStatus: appleStatus, detail: detail, on: db), claim)
                Log.info("receipt_rejected", ["verification_id": id.lowercasedString, "apple_status": appleStatus, "detail": detail])
                count("rejected", appleStatus: appleStatus)
                return .rejected(appleStatus: appleStatus, detail: detail)
            case .configurationError(let appleStatus, let detail):
                let delay = retry.randomDelayMs(attempt: submission.attempts)
                try await written(submissions.reschedule(claim, status: .failed, appleStatus: appleStatus, error: detail,
                                                         delay: .milliseconds(delay), on: db), claim)
                Log.error("apple_configuration_error", ["verification_id": id.lowercasedString, "apple_status": appleStatus, "detail": detail, "retry_in_ms": delay])
                count("configuration_error", appleStatus: appleStatus)
                return .configurationError(appleStatus: appleStatus, detail: detail)
            case .retryLater(let appleStatus, let reason):
                let delay = retry.randomDelayMs(attempt: submission.attempts)
                try await written(submissions.reschedule(claim, status: .pending, appleStatus: appleStatus, error: reason,
                                                         delay: .milliseconds(delay), on: db), claim)
                Log.warning("receipt_retry_scheduled", ["verification_id": id.lowercasedString, "apple_status": appleStatus, "reason": reason, "retry_in_ms": delay])
                count("retry_later", appleStatus: appleStatus)
                return .pending
            }
        } catch is ClaimSuperseded {
            Log.warning("receipt_attempt_superseded", ["verification_id": id.lowercasedString])
            return .pending
        } catch {
            // The database failed us: the submission stays claimed until its lease ends, then the worker retries it.
            Log.error("receipt_attempt_failed", ["verification_id": id.lowercasedString, "error": String(describing: error)])
            count("database_error", appleStatus: nil)
            return .pending
        }
    }

    /// Counts one attempt in `receipt_verifications_total` by how it ended and Apple's status (`none` when
    /// Apple gave none: a transport failure, another bundle's receipt, or the database failing).
    private func count(_ outcome: String, appleStatus: Int?) {
        Metrics.shared.increment(
            "receipt_verifications_total", "Verification attempts of posted receipts (posts and retries), by outcome and Apple's status.",
            labels: ["outcome": outcome, "apple_status": appleStatus.map(String.init) ?? "none"])
    }

    /// Throws `ClaimSuperseded` when a fenced write found the lease taken over (and so wrote nothing).
    private func written(_ held: Bool, _ claim: SubmissionClaim) throws {
        guard held else { throw ClaimSuperseded(verificationID: claim.verificationID) }
    }

    /// How many verifications this process runs now.
    var inFlightCount: Int { inFlight.count }

    /// Lets requests waiting for Apple (those waiting now and those about to) go on waiting, each within its own
    /// `wait_ms`, for at most `grace` milliseconds; then answers those still waiting (202). The verifications go on
    /// either way.
    func beginShutdown(grace: UInt64 = shutdownGraceMs) {
        guard !shuttingDown else { return }
        waitsEndAt = EventLoop.shared.now + grace
        let timer = LoopTimer()
        shutdownTimer = timer
        timer.start(after: grace) { [unowned self] in endWaits() }
    }

    /// Ends every wait still going (each request gets 202) and the shutdown's timer.
    private func endWaits() {
        shutdownTimer?.close()
        shutdownTimer = nil
        for release in waiters.values { release() }
        waiters.removeAll()
    }

    /// Gives up this process's claims on unfinished verifications so another instance takes them up at once (and
    /// ends any wait still going).
    func releaseClaims() async {
        endWaits()
        let claims = inFlight.values.map(\.claim)
        guard !claims.isEmpty else { return }
        do {
            try await submissions.release(claims, on: db)
            Log.info("claims_released", ["count": claims.count])
        } catch {
            Log.warning("claims_not_released", ["error": String(describing: error)])
        }
    }

    /// The task's value, or nil when it takes longer than `milliseconds` or than a shutdown's grace (the task goes
    /// on regardless).
    private func value(of task: Task<AttemptOutcome, Never>, waitingAtMost milliseconds: Int) async -> AttemptOutcome? {
        var limit = UInt64(max(0, milliseconds))
        if let waitsEndAt {
            let now = EventLoop.shared.now
            guard waitsEndAt > now else { return nil }
            limit = min(limit, waitsEndAt - now)
        }
        lastWaiter += 1
        let key = lastWaiter
        defer { waiters[key] = nil }
        return await LoopTimer.value(of: { await task.value }, waitingAtMost: limit) { release in
            waiters[key] = release
        }
    }
}
