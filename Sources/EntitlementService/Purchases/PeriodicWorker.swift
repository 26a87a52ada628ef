import ServiceRuntime
/// Runs `body` every `intervalMs` on the loop, never two runs at once, until stopped. When a run reports
/// that it found a full batch, the next run starts at once instead of waiting for the interval.
@Loop
final class PeriodicWorker {
    private let name: String
    private let intervalMs: UInt64
    private let body: @Loop () async -> Bool
    private let timer = LoopTimer()
    private var running: Task<Void, Never>?
    private var stopped = false

    /// - Parameter body: one run; returns true when more work is waiting.
    init(name: String, intervalMs: UInt64, body: @escaping @Loop () async -> Bool) {
        self.name = name
        self.intervalMs = intervalMs
        self.body = body
    }

    func start() {
        schedule(after: 0)
    }

    private func schedule(after milliseconds: UInt64) {
        guard !stopped else { return }
        timer.start(after: milliseconds) { [self] in
            running = Task { @Loop in
                let more = await body()
                running = nil
                schedule(after: more ? 0 : intervalMs)
            }
        }
    }

    /// Stops scheduling runs and waits for the current one to finish.
    func stop() async {
        stopped = true
        timer.close()
        await running?.value
        Log.info("worker_stopped", ["worker": name])
    }
}
