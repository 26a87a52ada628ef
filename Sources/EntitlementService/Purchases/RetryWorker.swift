import ServiceRuntime
/// The background retry of submissions Apple could not answer: claims due rows with
/// `FOR UPDATE SKIP LOCKED` (so any number of instances cooperate) and verifies them concurrently.
@Loop
enum RetryWorker {
    static let batchSize = 32

    static func make(service: ReceiptService, intervalMs: UInt64) -> PeriodicWorker {
        PeriodicWorker(name: "retry", intervalMs: intervalMs) {
            let due = try await service.submissions.claimDue(limit: batchSize, lease: service.lease, on: service.db)
            let attempts = due.map { submission in Task.onLoop { _ = await service.retry(submission) } }
            for attempt in attempts { await attempt.value }
            return due.count == batchSize
        }
    }
}
