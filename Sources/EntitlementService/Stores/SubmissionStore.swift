import ServiceRuntime
import EntitlementModel
import Foundation

/// The `receipt_submissions` table: durable storage of every posted receipt and the leases under which one
/// attempt at a time asks Apple about it. A lease is a `SubmissionClaim`; whatever its holder writes is
/// conditioned on still holding it.
@Loop
struct SubmissionStore {
    /// The columns a lease holder reads.
    private static let claimedColumns = "verification_id, claim_id, user_id, receipt_data, order_id, attempts"

    /// Stores a submission, already claimed for `lease` by the caller, or finds the identical one (same user,
    /// same receipt) still in flight, taking this post's `orderID` when it names one (the attempt under way or
    /// next reads it). The claim is returned only when the submission was created.
    func store(userID: String, receiptData: String, orderID: UUID?, lease: Duration,
               on db: some PostgresQueryable) async throws -> (verificationID: UUID, claim: ClaimedSubmission?) {
        let row = try await db.query("""
            INSERT INTO receipt_submissions (user_id, receipt_data, receipt_sha256, order_id, claimed_until, claim_id, attempts)
            VALUES ($1, $2, sha256(convert_to($2, 'UTF8')), $3, now() + $4, gen_random_uuid(), 1)
            ON CONFLICT (user_id, receipt_sha256) WHERE status IN ('pending', 'failed')
            DO UPDATE SET updated_at = now(), posted_at = now(), order_id = coalesce(EXCLUDED.order_id, receipt_submissions.order_id)
            RETURNING verification_id, claim_id, (xmax = 0) AS created
            """, [userID, receiptData, orderID, lease]).single()
        let verificationID = try row.uuid("verification_id")
        guard try row.bool("created") else { return (verificationID, nil) }
        return (verificationID, ClaimedSubmission(
            claim: SubmissionClaim(verificationID: verificationID, claimID: try row.uuid("claim_id")),
            userID: userID, receiptData: receiptData, orderID: orderID, attempts: 1))
    }

    /// Claims a submission still in flight for one verification attempt, unless a live lease holds it.
    func claim(_ verificationID: UUID, lease: Duration, on db: some PostgresQueryable) async throws -> ClaimedSubmission? {
        try await db.query("""
            UPDATE receipt_submissions
               SET claimed_until = now() + $2, claim_id = gen_random_uuid(), attempts = attempts + 1
             WHERE verification_id = $1 AND status IN ('pending', 'failed')
               AND (claimed_until IS NULL OR claimed_until < now())
            RETURNING \(Self.claimedColumns)
            """, [verificationID, lease]).rows.first.map(Self.claimed)
    }

    /// Claims up to `limit` submissions whose next attempt is due, skipping rows other instances hold.
    func claimDue(limit: Int, lease: Duration, on db: some PostgresQueryable) async throws -> [ClaimedSubmission] {
        try await db.query("""
            WITH due AS (
                SELECT verification_id AS due_id FROM receipt_submissions
                 WHERE status IN ('pending', 'failed') AND next_attempt_at <= now()
                   AND (claimed_until IS NULL OR claimed_until < now())
                 ORDER BY next_attempt_at
                 LIMIT $1
                 FOR UPDATE SKIP LOCKED)
            UPDATE receipt_submissions s
               SET claimed_until = now() + $2, claim_id = gen_random_uuid(), attempts = s.attempts + 1
              FROM due WHERE s.verification_id = due.due_id
            RETURNING \(Self.claimedColumns)
            """, [limit, lease]).rows.map(Self.claimed)
    }

    /// Ends a lease without a final answer: the next attempt is due after `delay`. False, and nothing
    /// written, when `claim` no longer holds the submission.
    func reschedule(_ claim: SubmissionClaim, status: SubmissionStatus, appleStatus: Int?, error: String, delay: Duration,
                    on db: some PostgresQueryable) async throws -> Bool {
        try await db.query("""
            UPDATE receipt_submissions
               SET status = $3, apple_status = $4, last_error = $5, claimed_until = NULL, updated_at = now(),
                   next_attempt_at = now() + $6
             WHERE verification_id = $1 AND claim_id = $2 AND status IN ('pending', 'failed')
            """, [claim.verificationID, claim.claimID, status.rawValue, appleStatus, error, delay]).affectedRows == 1
    }

    /// Records a final rejection: nothing was granted. False, and nothing written, when `claim` no longer
    /// holds the submission.
    func reject(_ claim: SubmissionClaim, appleStatus: Int?, detail: String, on db: some PostgresQueryable) async throws -> Bool {
        try await db.query("""
            UPDATE receipt_submissions
               SET status = 'invalid', apple_status = $3, last_error = $4, claimed_until = NULL,
                   updated_at = now(), resolved_at = now()
             WHERE verification_id = $1 AND claim_id = $2 AND status IN ('pending', 'failed')
            """, [claim.verificationID, claim.claimID, appleStatus, detail]).affectedRows == 1
    }

    /// Locks the submission for recording Apple's acceptance, in the caller's transaction, and returns when its
    /// user last posted it and the order it names, as they stand (a repost while it was being verified included);
    /// nil when `claim` no longer holds it (its lease ran out and another attempt claimed it, or that attempt
    /// already finished).
    func lockForRecording(_ claim: SubmissionClaim, on db: some PostgresQueryable) async throws -> (postedAt: Date, orderID: UUID?)? {
        try await db.query("""
            SELECT posted_at, order_id FROM receipt_submissions
             WHERE verification_id = $1 AND claim_id = $2 AND status IN ('pending', 'failed')
               FOR UPDATE
            """, [claim.verificationID, claim.claimID]).rows.first.map { (try $0.date("posted_at"), try $0.optionalUUID("order_id")) }
    }

    /// Marks the submission verified, in the transaction that recorded its purchases.
    func markVerified(_ claim: SubmissionClaim, appleStatus: Int, environment: StoreEnvironment, on db: some PostgresQueryable) async throws {
        _ = try await db.query("""
            UPDATE receipt_submissions
               SET status = 'verified', apple_status = $3, environment = $4, claimed_until = NULL,
                   last_error = NULL, updated_at = now(), resolved_at = now()
             WHERE verification_id = $1 AND claim_id = $2
            """, [claim.verificationID, claim.claimID, appleStatus, environment.rawValue])
    }

    /// Gives up leases still held, so another instance may claim those submissions at once.
    func release(_ claims: [SubmissionClaim], on db: some PostgresQueryable) async throws {
        _ = try await db.query("""
            UPDATE receipt_submissions s SET claimed_until = NULL
              FROM unnest($1, $2) AS held (verification_id, claim_id)
             WHERE s.verification_id = held.verification_id AND s.claim_id = held.claim_id
               AND s.status IN ('pending', 'failed')
            """, [claims.map(\.verificationID), claims.map(\.claimID)])
    }

    /// Where the attempt on submission `verificationID` stands; nil when there is no such submission.
    func attemptState(_ verificationID: UUID, on db: some PostgresQueryable) async throws -> SubmissionAttemptState? {
        try await db.query("""
            SELECT status, apple_status, environment, last_error,
                   claimed_until IS NOT NULL AND status IN ('pending', 'failed') AND claimed_until >= now() AS held,
                   claimed_until IS NOT NULL AND status IN ('pending', 'failed') AND claimed_until < now() AS lapsed
              FROM receipt_submissions WHERE verification_id = $1
            """, [verificationID]).rows.first.map { row in
            if try row.bool("held") { return .held }
            if try row.bool("lapsed") { return .lapsed }
            return .settled(try Self.status(row), appleStatus: try row.optionalInt("apple_status"),
                            environment: try row.optionalString("environment").flatMap(StoreEnvironment.init(rawValue:)),
                            detail: try row.optionalString("last_error"))
        }
    }

    /// The submission with this id, if any (its receipt is not read).
    func find(_ verificationID: UUID, on db: some PostgresQueryable) async throws -> Submission? {
        try await db.query("""
            SELECT verification_id, user_id, order_id, status, apple_status, environment, attempts, created_at, updated_at
              FROM receipt_submissions WHERE verification_id = $1
            """, [verificationID]).rows.first.map(Self.submission)
    }

    /// How many submissions await a final answer (pending or failed, so retried), and the age in seconds of
    /// the oldest of them (0 when there is none, never below 0). Against `clock_timestamp()`, not `now()`: a
    /// statement's start may precede that of a transaction whose row its snapshot sees, and `greatest` covers a
    /// wall clock stepped back.
    func backlog(on db: some PostgresQueryable) async throws -> (count: Int, oldestAgeSeconds: Double) {
        let row = try await db.query("""
            SELECT count(*)::int AS count,
                   greatest(coalesce(extract(epoch FROM clock_timestamp() - min(created_at)), 0), 0)::float8 AS oldest
              FROM receipt_submissions WHERE status IN ('pending', 'failed')
            """, []).single()
        return (try row.int("count"), try row.double("oldest"))
    }

    private static func claimed(_ row: PostgresRow) throws -> ClaimedSubmission {
        ClaimedSubmission(
            claim: SubmissionClaim(verificationID: try row.uuid("verification_id"), claimID: try row.uuid("claim_id")),
            userID: try row.string("user_id"), receiptData: try row.string("receipt_data"),
            orderID: try row.optionalUUID("order_id"), attempts: try row.int("attempts"))
    }

    private static func status(_ row: PostgresRow) throws -> SubmissionStatus {
        let status = try row.string("status")
        guard let parsed = SubmissionStatus(rawValue: status) else {
            throw PostgresError(kind: .decoding, message: "receipt_submissions.status holds '\(status)'")
        }
        return parsed
    }

    private static func submission(_ row: PostgresRow) throws -> Submission {
        Submission(
            verificationID: try row.uuid("verification_id"), userID: try row.string("user_id"),
            orderID: try row.optionalUUID("order_id"), status: try status(row), appleStatus: try row.optionalInt("apple_status"),
            environment: try row.optionalString("environment").flatMap(StoreEnvironment.init(rawValue:)),
            attempts: try row.int("attempts"), createdAt: try row.date("created_at"), updatedAt: try row.date("updated_at"))
    }
}
