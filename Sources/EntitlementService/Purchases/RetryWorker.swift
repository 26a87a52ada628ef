import ServiceRuntime
/// The background retry of submissions Apple could not answer: claims due rows with
/// `FOR UPDATE SKIP LOCKED` (so any number of instances cooperate) and verifies them concurrently, at most
/// `batchSize` at a time in this process. A run starts the attempts it claimed and returns: a slow one (Apple
/// taking its whole timeout, several times over redirects) holds up none of those that come due meanwhile.
@Loop
enum RetryWorker {
    static let batchSize = 32

    static func make(service: ReceiptService, intervalMs: UInt64) -> PeriodicWorker {
        PeriodicWorker(name: "retry", intervalMs: intervalMs) {
            let room = batchSize - service.inFlightCount
            guard room > 0 else { return false }
            let due = try await service.submissions.claimDue(limit: room, lease: service.lease, on: service.db)
            for submission in due { service.startRetry(submission) }
            return due.count == room
        }
    }
}
