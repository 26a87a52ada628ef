import ServiceRuntime
/// Runs `body` every `intervalMs` on the loop, never two runs at once, until stopped. When a run reports
/// that it found a full batch, the next run starts at once instead of waiting for the interval. A run that
/// throws is retried at the next interval; a series of failures is logged once as `worker_failing` (with the
/// first error) and once as `worker_recovered` when a run succeeds again (`WorkerHealth`). A worker made with
/// `cancelsOnStop` cancels its run when stopped, for a run that may take long and can stop part-way, keeping its place.
@Loop
final class PeriodicWorker {
    private let name: String
    private let intervalMs: UInt64
    private let cancelsOnStop: Bool
    private let body: @Loop () async throws -> Bool
    private let timer = LoopTimer()
    private var running: Task<Void, Never>?
    private var stopped = false
    private var health = WorkerHealth()

    /// - Parameter body: one run; returns true when more work is waiting.
    init(name: String, intervalMs: UInt64, cancelsOnStop: Bool = false, body: @escaping @Loop () async throws -> Bool) {
        self.name = name
        self.intervalMs = intervalMs
        self.cancelsOnStop = cancelsOnStop
        self.body = body
    }

    func start() {
        schedule(after: 0)
    }

    private func schedule(after milliseconds: UInt64) {
        guard !stopped else { return }
        timer.start(after: milliseconds) { [self] in
            running = Task.onLoop { [self] in
                var more = false
                do {
                    more = try await body()
                    WorkerHealth.log(health.runSucceeded(), worker: name)
                } catch {
                    Log.debug("worker_run_failed", ["worker": name, "error": String(describing: error)])
                    WorkerHealth.log(health.runFailed(String(describing: error)), worker: name)
                }
                running = nil
                schedule(after: more ? 0 : intervalMs)
            }
        }
    }

    /// Stops scheduling runs and waits for the current one to finish (cancelled first, with `cancelsOnStop`).
    func stop() async {
        stopped = true
        timer.close()
        if cancelsOnStop { running?.cancel() }
        await running?.value
        Log.info("worker_stopped", ["worker": name])
    }
}

extension WorkerHealth {
    /// Logs `change` of `worker`'s runs: `worker_failing` (error) or `worker_recovered` (info); nothing for nil.
    static func log(_ change: Change?, worker: String) {
        switch change {
        case .failing(let error): Log.error("worker_failing", ["worker": worker, "error": error])
        case .recovered(let failedRuns): Log.info("worker_recovered", ["worker": worker, "failed_runs": failedRuns])
        case nil: break
        }
    }
}
