import CUV
import ServiceRuntime
import Foundation

/// Several `serve` processes on one listening socket, so the service uses more than one core: the first
/// process binds the port once, then starts `WORKERS - 1` copies of itself that inherit the socket (its
/// number in `socketVariable`) and accept on it too. SIGTERM/SIGINT are passed on to the copies as soon as
/// the first process receives them, and it exits once they have; a copy whose first process is gone (killed
/// outright) gets SIGTERM from the kernel, so none goes on serving alone. Every copy runs the whole service,
/// background workers included; they share PostgreSQL, where `FOR UPDATE SKIP LOCKED` keeps them from
/// taking the same job. They also share a count of answered writes (`SharedCounter`, a memfd the copies
/// inherit like the socket), so that a write answered by one is never read stale from another's cache.
enum WorkerProcesses {
    /// Set in the environment of the copies: the number of the listening socket they inherit. A process that
    /// has it serves that socket and starts no copies of its own.
    static let socketVariable = "ENTITLEMENT_SERVICE_LISTEN_FD"
    /// Set in the environment of the copies: the first process's id.
    static let parentVariable = "ENTITLEMENT_SERVICE_PARENT_PID"
    /// Set in the environment of the copies: the descriptor of the write count they share.
    static let writesVariable = "ENTITLEMENT_SERVICE_WRITES_FD"

    /// How many processes `serve` should run in all: `WORKERS` (default 1), or 1 inside a copy.
    static func count(environment: [String: String]) throws(ConfigurationError) -> Int {
        guard environment[socketVariable] == nil, let raw = environment["WORKERS"], !raw.isEmpty else { return 1 }
        guard let count = Int(raw), (1...64).contains(count) else {
            throw ConfigurationError(variable: "WORKERS", problem: "expected an integer in 1...64, got '\(raw)'")
        }
        return count
    }

    /// The listening socket a first process handed down to this copy; nil in the first process. A copy also
    /// asks for SIGTERM when its first process ends, and fails if that has already happened.
    static func inheritedSocket(environment: [String: String]) throws -> Int32? {
        guard let raw = environment[socketVariable] else { return nil }
        guard let fd = Int32(raw), fd > 2, ListeningSocket.isListening(fd) else {
            throw ConfigurationError(variable: socketVariable, problem: "must name a listening socket inherited from serve, got '\(raw)'")
        }
        let parent = environment[parentVariable].flatMap { pid_t($0) }
        guard cuv_set_parent_death_signal(SIGTERM) == 0, let parent, getppid() == parent else {
            throw WorkerProcessError(description: "a copy of serve whose first process (\(environment[parentVariable] ?? "?")) is gone")
        }
        return fd
    }

    /// The count of answered writes this process shares with its copies: inherited in a copy, made anew in a
    /// first process that will start `count - 1` copies, nil in a process that serves alone.
    static func sharedWrites(environment: [String: String], count: Int) throws -> SharedCounter? {
        if let raw = environment[writesVariable] {
            guard let descriptor = Int32(raw), descriptor > 2 else {
                throw ConfigurationError(variable: writesVariable, problem: "must name a shared counter inherited from serve, got '\(raw)'")
            }
            return try SharedCounter(inheriting: descriptor)
        }
        return count > 1 ? try SharedCounter.shared() : nil
    }

    /// Starts copy number `index` of this executable running `serve`, inheriting `socket` (a listening socket)
    /// and `writes` (their close-on-exec flags are cleared while it starts); returns its process id.
    static func spawnCopy(_ index: Int, sharing socket: Int32, writes: SharedCounter?) throws -> pid_t {
        var environment = ProcessInfo.processInfo.environment
        environment[socketVariable] = String(socket)
        environment[parentVariable] = String(getpid())
        let inherited = [socket] + (writes?.descriptor.map { [$0] } ?? [])
        if let descriptor = writes?.descriptor { environment[writesVariable] = String(descriptor) }
        let executable = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().path
        var saved: [(descriptor: Int32, flags: Int32)] = []
        defer { for (descriptor, flags) in saved { _ = fcntl(descriptor, F_SETFD, flags) } }
        for descriptor in inherited {
            let flags = fcntl(descriptor, F_GETFD)
            guard flags >= 0, fcntl(descriptor, F_SETFD, flags & ~FD_CLOEXEC) == 0 else { throw failure("fcntl") }
            saved.append((descriptor, flags))
        }
        let pid = try spawn(executable, arguments: ["serve"], environment: environment)
        Log.info("worker_process_started", ["index": index, "pid": pid])
        return pid
    }

    /// Waits (off the loop, on a thread of its own) until `child` has exited; its wait status.
    static func exitStatus(of child: pid_t) async -> Int32 {
        await withCheckedContinuation { (continuation: CheckedContinuation<Int32, Never>) in
            Thread.detachNewThread {
                var status: Int32 = 0
                while waitpid(child, &status, 0) < 0 && errno == EINTR {}
                continuation.resume(returning: status)
            }
        }
    }

    /// Logs how `child` ended (`status` as `waitpid` gives it): at `info` for an exit the first process asked
    /// for, else at `warn`.
    static func logExit(_ child: pid_t, status: Int32, expected: Bool) {
        // WIFEXITED / WEXITSTATUS / WTERMSIG, which Swift does not import.
        let signal = status & 0x7f
        let code: Int32? = signal == 0 ? (status >> 8) & 0xff : nil
        if expected && signal == 0 {
            Log.info("worker_process_exited", ["pid": child, "status": code])
        } else {
            Log.warning("worker_process_exited", ["pid": child, "status": code, "signal": signal == 0 ? nil : signal, "expected": expected])
        }
    }

    /// `posix_spawn` with the signal mask emptied and every signal at its default action, as after a fresh exec.
    private static func spawn(_ path: String, arguments: [String], environment: [String: String]) throws -> pid_t {
        let argv = ([path] + arguments).map { strdup($0) } + [nil]
        let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { for pointer in argv + envp { free(pointer) } }
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var none = sigset_t()
        var all = sigset_t()
        sigemptyset(&none)
        sigfillset(&all)
        posix_spawnattr_setsigmask(&attributes, &none)
        posix_spawnattr_setsigdefault(&attributes, &all)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        var pid: pid_t = 0
        let status = posix_spawn(&pid, path, nil, &attributes, argv, envp)
        guard status == 0 else {
            errno = status
            throw failure("posix_spawn")
        }
        return pid
    }

    private static func failure(_ call: String) -> WorkerProcessError {
        WorkerProcessError(description: "starting a worker process: \(call) failed: \(String(cString: strerror(errno)))")
    }
}

/// A copy of the service that could not be started.
struct WorkerProcessError: Error, CustomStringConvertible {
    var description: String
}
