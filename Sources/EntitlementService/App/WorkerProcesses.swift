import ServiceRuntime
import Foundation

/// Several `serve` processes on one port (`SO_REUSEPORT`), so the service uses more than one core: the first
/// process starts `WORKERS - 1` copies of itself, forwards SIGTERM/SIGINT to them, and exits once they have.
/// Every copy runs the whole service, background workers included; they share PostgreSQL, where
/// `FOR UPDATE SKIP LOCKED` keeps them from taking the same job.
enum WorkerProcesses {
    /// Set in the environment of the copies, so they do not start copies of their own.
    static let childMarker = "ENTITLEMENT_SERVICE_WORKER_CHILD"

    /// How many processes `serve` should run in all: `WORKERS` (default 1), or 1 inside a copy.
    static func count(environment: [String: String]) throws(ConfigurationError) -> Int {
        guard environment[childMarker] == nil, let raw = environment["WORKERS"], !raw.isEmpty else { return 1 }
        guard let count = Int(raw), (1...64).contains(count) else {
            throw ConfigurationError(variable: "WORKERS", problem: "expected an integer in 1...64, got '\(raw)'")
        }
        return count
    }

    /// Starts `count - 1` copies of this executable running `serve`; returns them.
    static func spawn(_ count: Int) throws -> [Process] {
        guard count > 1 else { return [] }
        var environment = ProcessInfo.processInfo.environment
        environment[childMarker] = "1"
        return try (1..<count).map { index in
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
            process.arguments = ["serve"]
            process.environment = environment
            try process.run()
            Log.info("worker_process_started", ["index": index, "pid": process.processIdentifier])
            return process
        }
    }

    /// Passes `signal` on to the copies and waits (off the loop) until they have exited.
    static func stop(_ processes: [Process], signal: Int32 = SIGTERM) async {
        guard !processes.isEmpty else { return }
        for process in processes where process.isRunning { kill(process.processIdentifier, signal) }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            Thread.detachNewThread {
                for process in processes { process.waitUntilExit() }
                continuation.resume()
            }
        }
    }
}
