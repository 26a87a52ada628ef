/// Whether a background worker's runs succeed, so that an outage lasting many runs (PostgreSQL down) is
/// logged when it begins and when it ends, not at every run. Pure: each run's result goes in, what to log
/// comes out.
struct WorkerHealth: Sendable, Equatable {
    /// A change worth one log line.
    enum Change: Sendable, Equatable {
        /// The first failed run after a successful one (or the start): `worker_failing` with its error.
        case failing(error: String)
        /// The first successful run after failures: `worker_recovered`, with how many runs failed.
        case recovered(failedRuns: Int)
    }

    /// Runs failed in a row so far.
    private(set) var failedRuns = 0

    /// A run failed with `error`; `.failing` when it is the first of a series.
    mutating func runFailed(_ error: String) -> Change? {
        failedRuns += 1
        return failedRuns == 1 ? .failing(error: error) : nil
    }

    /// A run succeeded; `.recovered` when runs had failed before it.
    mutating func runSucceeded() -> Change? {
        defer { failedRuns = 0 }
        return failedRuns > 0 ? .recovered(failedRuns: failedRuns) : nil
    }
}
