import ServiceRuntime

/// The retry backlog on `/metrics`: `receipt_retry_backlog` (submissions awaiting a final answer) and
/// `receipt_retry_oldest_age_seconds` (how long the oldest has waited), read from the database by a periodic
/// worker every `intervalMs`, never at scrape time.
@Loop
final class RetryBacklog {
    private var count = 0.0
    private var oldestAgeSeconds = 0.0

    /// The worker refreshing the figures, which it registers with `metrics`.
    static func make(submissions: SubmissionStore, db: PostgresPool, metrics: Metrics = .shared, intervalMs: UInt64) -> PeriodicWorker {
        let backlog = RetryBacklog()
        metrics.gauge("receipt_retry_backlog", "Receipt submissions awaiting a final answer from Apple (pending or failed), as last read.") {
            backlog.count
        }
        metrics.gauge("receipt_retry_oldest_age_seconds", "Seconds the oldest submission awaiting a final answer has waited, as last read.") {
            backlog.oldestAgeSeconds
        }
        return PeriodicWorker(name: "retry-backlog", intervalMs: intervalMs) {
            let (count, age) = try await submissions.backlog(on: db)
            backlog.count = Double(count)
            backlog.oldestAgeSeconds = age
            return false
        }
    }
}
