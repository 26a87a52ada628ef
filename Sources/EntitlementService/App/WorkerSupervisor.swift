import ServiceRuntime
import Foundation

/// The first process's watch over its `WORKERS` copies: a copy that ends while the service runs (killed,
/// crashed) is logged and replaced, after a pause that doubles (from 0.5 s to 30 s) while replacements keep
/// ending within 10 s of their start; at shutdown the signal reaches every copy and the first process waits
/// for them all.
@Loop
final class WorkerSupervisor {
    private let socket: Int32
    private let writes: SharedCounter?
    /// The running copies by their number (1 ..< count).
    private(set) var running: [Int: pid_t] = [:]
    private var watches: [Task<Void, Never>] = []
    private var stopping = false

    /// A copy that lived less than this is counted as ending soon after its start.
    static let shortLife = Duration.seconds(10)

    /// Starts copies 1 ..< `count` sharing `socket` and `writes`, and watches each.
    init(count: Int, socket: Int32, writes: SharedCounter?) throws {
        self.socket = socket
        self.writes = writes
        for index in 1..<max(count, 1) {
            let pid = try WorkerProcesses.spawnCopy(index, sharing: socket, writes: writes)
            running[index] = pid
            watches.append(Task.onLoop { await self.watch(index, pid) })
        }
    }

    /// Stops replacing copies and sends `signal` to every running one.
    func signal(_ signal: Int32) {
        stopping = true
        for child in running.values { kill(child, signal) }
    }

    /// Returns once every copy has exited (after `signal`).
    func waitForExit() async {
        for watch in watches { await watch.value }
    }

    /// Waits for copy `index` to end and replaces it, until the supervisor stops.
    private func watch(_ index: Int, _ first: pid_t) async {
        var pid = first
        var shortLives = 0
        while true {
            let started = ContinuousClock.now
            let status = await WorkerProcesses.exitStatus(of: pid)
            running[index] = nil
            WorkerProcesses.logExit(pid, status: status, expected: stopping)
            guard !stopping else { return }
            shortLives = started.duration(to: .now) < Self.shortLife ? shortLives + 1 : 0
            let pauseMs = min(30_000, 500 << min(shortLives, 6))
            Log.warning("worker_process_replacing", ["index": index, "in_ms": pauseMs])
            while true {
                if await pause(milliseconds: pauseMs) { return }
                do {
                    pid = try WorkerProcesses.spawnCopy(index, sharing: socket, writes: writes)
                    running[index] = pid
                    break
                } catch {
                    Log.error("worker_process_start_failed", ["index": index, "error": "\(error)"])
                }
            }
        }
    }

    /// Waits `milliseconds` in steps short enough for shutdown not to wait on it; true when the supervisor stopped.
    private func pause(milliseconds: Int) async -> Bool {
        var left = milliseconds
        while left > 0, !stopping {
            await LoopTimer.sleep(milliseconds: UInt64(min(left, 100)))
            left -= 100
        }
        return stopping
    }
}
