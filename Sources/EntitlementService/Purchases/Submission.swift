import ServiceRuntime
import EntitlementModel
import Foundation

/// Where a receipt submission stands (`GET /v1/receipts/{verification_id}`).
enum SubmissionStatus: String, Sendable, Codable {
    /// Stored; Apple has not given a final answer yet.
    case pending
    /// Apple accepted it and its purchases were recorded.
    case verified
    /// Apple, or a local check, rejected it (or its purchase belongs to someone else under `keep`).
    case invalid
    /// Apple says our configuration is wrong (`21004`, `21000`); retried after the operator fixes it.
    case failed
}

/// One stored receipt submission.
struct Submission: Sendable {
    var verificationID: String
    var userID: String
    var receiptData: String
    var orderID: String?
    var status: SubmissionStatus
    var appleStatus: Int?
    var environment: StoreEnvironment?
    var attempts: Int
    var lastError: String?
    var createdAt: Date
    var updatedAt: Date

    static let columns = """
        verification_id::text AS verification_id, user_id, receipt_data, order_id::text AS order_id, status,
        apple_status, environment, attempts, last_error, created_at, updated_at
        """

    init(row: PostgresRow) throws {
        verificationID = try row.string("verification_id")
        userID = try row.string("user_id")
        receiptData = try row.string("receipt_data")
        orderID = try row.optionalString("order_id")
        let status = try row.string("status")
        guard let parsed = SubmissionStatus(rawValue: status) else {
            throw PostgresError(kind: .decoding, message: "receipt_submissions.status holds '\(status)'")
        }
        self.status = parsed
        appleStatus = try row.optionalInt("apple_status")
        environment = try row.optionalString("environment").flatMap(StoreEnvironment.init(rawValue:))
        attempts = try row.int("attempts")
        lastError = try row.optionalString("last_error")
        createdAt = try row.date("created_at")
        updatedAt = try row.date("updated_at")
    }
}

/// The `receipt_submissions` table: durable storage of every posted receipt and the leases under which
/// one instance at a time asks Apple about it.
@Loop
struct SubmissionStore {
    let db: PostgresPool

    /// Stores a submission, already claimed for `leaseMs` by the caller, or finds the identical one (same user,
    /// same receipt) still in flight. `created` tells which; only a created one is claimed.
    func store(userID: String, receiptData: String, orderID: String?, leaseMs: Int) async throws -> (id: String, created: Bool) {
        let result = try await db.query("""
            INSERT INTO receipt_submissions (user_id, receipt_data, receipt_sha256, order_id, claimed_until, attempts)
            VALUES ($1, $2, sha256(convert_to($2, 'UTF8')), $3::uuid, now() + make_interval(secs => $4::double precision / 1000), 1)
            ON CONFLICT (user_id, receipt_sha256) WHERE status IN ('pending', 'failed')
            DO UPDATE SET updated_at = now()
            RETURNING verification_id::text AS verification_id, (xmax = 0) AS created
            """, [userID, receiptData, orderID, leaseMs])
        let row = try result.single()
        return (try row.string("verification_id"), try row.bool("created"))
    }

    /// Claims a submission still in flight for one verification attempt, unless another attempt holds it.
    func claim(_ id: String, leaseMs: Int) async throws -> Submission? {
        try await db.query("""
            UPDATE receipt_submissions
               SET claimed_until = now() + make_interval(secs => $2::double precision / 1000), attempts = attempts + 1
             WHERE verification_id = $1::uuid AND status IN ('pending', 'failed')
               AND (claimed_until IS NULL OR claimed_until < now())
            RETURNING \(Submission.columns)
            """, [id, leaseMs]).rows.first.map(Submission.init(row:))
    }

    /// Claims up to `limit` submissions whose next attempt is due, skipping rows other instances hold.
    func claimDue(limit: Int, leaseMs: Int) async throws -> [Submission] {
        try await db.query("""
            WITH due AS (
                SELECT verification_id AS due_id FROM receipt_submissions
                 WHERE status IN ('pending', 'failed') AND next_attempt_at <= now()
                   AND (claimed_until IS NULL OR claimed_until < now())
                 ORDER BY next_attempt_at
                 LIMIT $1
                 FOR UPDATE SKIP LOCKED)
            UPDATE receipt_submissions s
               SET claimed_until = now() + make_interval(secs => $2::double precision / 1000), attempts = s.attempts + 1
              FROM due WHERE s.verification_id = due.due_id
            RETURNING \(Submission.columns)
            """, [limit, leaseMs]).rows.map(Submission.init(row:))
    }

    /// Releases a claim without a final answer: the next attempt is due in `delayMs`.
    func reschedule(_ id: String, status: SubmissionStatus, appleStatus: Int?, error: String, delayMs: Int) async throws {
        _ = try await db.query("""
            UPDATE receipt_submissions
               SET status = $2, apple_status = $3, last_error = $4, claimed_until = NULL, updated_at = now(),
                   next_attempt_at = now() + make_interval(secs => $5::double precision / 1000)
             WHERE verification_id = $1::uuid AND status IN ('pending', 'failed')
            """, [id, status.rawValue, appleStatus, error, delayMs])
    }

    /// Records a final rejection: nothing was granted.
    func reject(_ id: String, appleStatus: Int?, detail: String) async throws {
        _ = try await db.query("""
            UPDATE receipt_submissions
               SET status = 'invalid', apple_status = $2, last_error = $3, claimed_until = NULL,
                   updated_at = now(), resolved_at = now()
             WHERE verification_id = $1::uuid AND status IN ('pending', 'failed')
            """, [id, appleStatus, detail])
    }

    /// How many submissions await a final answer (pending or failed, so retried), and the age in seconds of
    /// the oldest of them (0 when there is none).
    func backlog() async throws -> (count: Int, oldestAgeSeconds: Double) {
        let row = try await db.query("""
            SELECT count(*)::int AS count, coalesce(extract(epoch FROM now() - min(created_at)), 0)::float8 AS oldest
              FROM receipt_submissions WHERE status IN ('pending', 'failed')
            """, []).single()
        return (try row.int("count"), try row.double("oldest"))
    }

    /// The submission with this id, if any.
    func find(_ id: String) async throws -> Submission? {
        try await db.query("SELECT \(Submission.columns) FROM receipt_submissions WHERE verification_id = $1::uuid", [id])
            .rows.first.map(Submission.init(row:))
    }
}
