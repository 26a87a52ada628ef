import Glibc

/// The process's limit on open descriptors, which bounds its sockets: client connections, database connections,
/// calls to Apple and to webhook receivers. Beyond it libuv accepts and drops new clients unanswered, and a
/// database or Apple connection cannot be opened.
public enum OpenFileLimit {
    /// Raises the soft limit to the hard one, as nginx's `worker_rlimit_nofile` and Go's runtime do (a soft limit
    /// of 1024 is common, far below the connections a server is set to hold); processes started afterwards inherit
    /// it. Returns the soft limit in force, `Int.max` when unlimited, nil when it cannot be read.
    public static func raiseToHardLimit() -> Int? {
        var limit = rlimit()
        guard getrlimit(resource, &limit) == 0 else { return nil }
        if limit.rlim_cur < limit.rlim_max {
            var raised = limit
            raised.rlim_cur = limit.rlim_max
            if setrlimit(resource, &raised) == 0 { limit = raised }
        }
        return count(limit.rlim_cur)
    }

    /// The soft and hard limits now, nil when they cannot be read (for tests).
    static func current() -> (soft: Int, hard: Int)? {
        var limit = rlimit()
        guard getrlimit(resource, &limit) == 0 else { return nil }
        return (count(limit.rlim_cur), count(limit.rlim_max))
    }

    private static let resource = __rlimit_resource_t(RLIMIT_NOFILE.rawValue)

    /// A limit as a count: `RLIM_INFINITY` (all bits set) is beyond any `Int`, so it reads as `Int.max`.
    private static func count(_ raw: rlim_t) -> Int {
        Int(clamping: raw)
    }
}
