import ServiceRuntime
import Foundation

/// A run of notification history recovery for one environment, as claimed: the window in progress (nil when
/// the claim starts a new one), where in it the next page starts, and how far the last complete run reached.
struct NotificationHistoryRun: Sendable {
    var environment: String
    /// Names every write of this claim; a run whose lease ran out and was claimed again writes nothing.
    var claimID: UUID
    var windowStart: Date?
    var windowEnd: Date?
    /// Apple's token of the next page of the window (nil: its first page).
    var paginationToken: String?
    /// The end of the window of the last complete run.
    var coveredUntil: Date?
    /// Claims since the last complete run, this one included.
    var attempts: Int
}

/// The `notification_history_runs` table: one row per App Store environment, claimed with `FOR UPDATE SKIP
/// LOCKED` under a lease, with the window and the page of the run in progress kept after every page.
@Loop
struct NotificationHistoryStore {
    /// Makes the runs of `environments` due now, unless one is claimed (its holder, or a take-over once its
    /// lease ends, carries it on): at start, so missed notifications are fetched at once.
    func runNow(_ environments: [String], on db: some PostgresQueryable) async throws {
        _ = try await db.query("""
            UPDATE notification_history_runs SET next_run_at = now(), updated_at = now()
             WHERE environment = ANY($1) AND claim_id IS NULL AND next_run_at > now()
            """, [environments])
    }

    /// Claims the due run of one of `environments` that no other instance holds, if any; it is not due again
    /// before `lease` has passed (each page extends it).
    func claim(_ environments: [String], lease: Duration, on db: some PostgresQueryable) async throws -> NotificationHistoryRun? {
        try await db.query("""
            WITH due AS (
                SELECT environment FROM notification_history_runs
                 WHERE environment = ANY($1) AND next_run_at <= now()
                 ORDER BY next_run_at LIMIT 1
                   FOR UPDATE SKIP LOCKED)
            UPDATE notification_history_runs r
               SET claim_id = gen_random_uuid(), next_run_at = now() + $2, attempts = r.attempts + 1, updated_at = now()
              FROM due WHERE r.environment = due.environment
            RETURNING r.environment, r.claim_id, r.window_start, r.window_end, r.pagination_token, r.covered_until, r.attempts
            """, [environments, lease]).rows.first.map { row in
            NotificationHistoryRun(
                environment: try row.string("environment"), claimID: try row.uuid("claim_id"),
                windowStart: try row.optionalDate("window_start"), windowEnd: try row.optionalDate("window_end"),
                paginationToken: try row.optionalString("pagination_token"), coveredUntil: try row.optionalDate("covered_until"),
                attempts: try row.int("attempts"))
        }
    }

    /// Starts the window `start`–`end` of a claimed run at its first page; false when the claim was taken over.
    func begin(_ run: NotificationHistoryRun, start: Date, end: Date, on db: some PostgresQueryable) async throws -> Bool {
        try await db.query("""
            UPDATE notification_history_runs
               SET window_start = $3, window_end = $4, pagination_token = NULL, updated_at = now()
             WHERE environment = $1 AND claim_id = $2
            """, [run.environment, run.claimID, start, end]).affectedRows == 1
    }

    /// Keeps the place of a claimed run after a page (`token`: the next page's) and extends its lease; false
    /// when the claim was taken over.
    func advance(_ run: NotificationHistoryRun, to token: String, lease: Duration, on db: some PostgresQueryable) async throws -> Bool {
        try await db.query("""
            UPDATE notification_history_runs SET pagination_token = $3, next_run_at = now() + $4, updated_at = now()
             WHERE environment = $1 AND claim_id = $2
            """, [run.environment, run.claimID, token, lease]).affectedRows == 1
    }

    /// Ends a claimed run whose every page was read: its window is covered, the next run is due after `interval`.
    func complete(_ run: NotificationHistoryRun, interval: Duration, on db: some PostgresQueryable) async throws -> Bool {
        try await db.query("""
            UPDATE notification_history_runs
               SET covered_until = window_end, window_start = NULL, window_end = NULL, pagination_token = NULL, claim_id = NULL,
                   next_run_at = now() + $3, attempts = 0, last_error = NULL, completed_at = now(), updated_at = now()
             WHERE environment = $1 AND claim_id = $2
            """, [run.environment, run.claimID, interval]).affectedRows == 1
    }

    /// Releases a claimed run that Apple could not finish, due again after `delay` at the page where it stopped,
    /// or at a new window when `restartWindow` (Apple refused the window or its token); `error` kept for the operator.
    func postpone(_ run: NotificationHistoryRun, by delay: Duration, restartWindow: Bool, error: String,
                  on db: some PostgresQueryable) async throws -> Bool {
        try await db.query("""
            UPDATE notification_history_runs
               SET claim_id = NULL, next_run_at = now() + $3, last_error = $4, updated_at = now(),
                   window_start = CASE WHEN $5 THEN NULL ELSE window_start END,
                   window_end = CASE WHEN $5 THEN NULL ELSE window_end END,
                   pagination_token = CASE WHEN $5 THEN NULL ELSE pagination_token END
             WHERE environment = $1 AND claim_id = $2
            """, [run.environment, run.claimID, delay, error, restartWindow]).affectedRows == 1
    }
}
