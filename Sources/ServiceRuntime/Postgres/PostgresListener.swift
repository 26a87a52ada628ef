/// A dedicated PostgreSQL connection that `LISTEN`s on a set of channels and stays listening.
///
/// It hands every notification to `onNotification` as it is read, and reports through `onStateChange` when
/// it starts and stops listening: `true` once its `LISTEN`s are in force on a fresh connection (notifications
/// sent while it was not listening are lost, so the owner must assume anything changed), `false` as soon as
/// the connection is known to be gone. A lost connection is replaced at once, then after growing delays while
/// replacing it keeps failing. A light query every `pingIntervalMs` that must answer within `pingTimeoutMs`
/// notices a connection that died without a word (a half-open TCP connection never reports an error). With
/// `answerWindowMs` set, a connection that merely stalls (a hung server process, a partition: notifications
/// held back, nothing closed) also stops counting as listening, sooner than the ping's timeout.
@Loop
public final class PostgresListener {
    /// How the listener connects, what it listens to, and its timing.
    public struct Settings: Sendable {
        /// A libpq connection string or `postgresql://` URI.
        public var conninfo: String
        /// The channels to `LISTEN` on.
        public var channels: [String]
        /// Shown in `pg_stat_activity`, unless `conninfo` names one.
        public var applicationName = "entitlement-service-listener"
        /// Time allowed to open the connection.
        public var connectTimeoutMs: UInt64 = 5_000
        /// Time between liveness queries on an idle listening connection.
        public var pingIntervalMs: UInt64 = 1_000
        /// Time a liveness query (or the `LISTEN` itself) may take before the connection is given up.
        public var pingTimeoutMs: UInt64 = 2_000
        /// When set, the listener counts as listening only until `answerWindowMs` after sending the last query
        /// that answered (the `LISTEN`, then each ping): past that, notifications committed since may be held
        /// up in a stalled connection, so `onStateChange(false)` is reported at once, and `true` when a ping
        /// sent less than `answerWindowMs` ago answers again. Pings should come well within it. Nil: only a
        /// closed connection ends listening.
        public var answerWindowMs: UInt64?
        /// The wait before the first retry after a failed attempt; it doubles after each further failure.
        public var retryDelayMs: UInt64 = 100
        /// The longest wait between attempts.
        public var maxRetryDelayMs: UInt64 = 5_000

        /// Settings for `conninfo` and `channels`; timing and `applicationName` keep their defaults (5 s connect, 1 s pings).
        public init(conninfo: String, channels: [String]) {
            self.conninfo = conninfo
            self.channels = channels
        }
    }

    /// The settings the listener was made with.
    public let settings: Settings
    /// True while the `LISTEN`s are in force on a live connection.
    public private(set) var isListening = false
    /// The server process of the listening connection; nil while not listening.
    public var backendPID: Int32? { isListening ? connection?.backendPID : nil }

    private let onNotification: @Loop (PostgresNotification) -> Void
    private let onStateChange: @Loop (Bool) -> Void
    /// With `answerWindowMs`: told the window's new end (loop time, ms) at each answered query. An owner that
    /// compares it with the loop's clock at every use needs no timer: a process paused past the window (stopped,
    /// swapped out) runs the I/O callbacks of its wake-up, requests among them, before its timers, and notifications
    /// held up meanwhile may not have been read yet.
    private let onWindow: @Loop (UInt64) -> Void
    private var connection: PostgresConnection?
    /// Reports the end of `answerWindowMs` since the last answered query; re-armed by each answer.
    private let answerDeadline = LoopTimer()
    private var task: Task<Void, Never>?
    private var stopping = false
    /// The supervising task's current wait, cut short by `wake()`.
    private var pause: (timer: LoopTimer, continuation: CheckedContinuation<Void, Never>)?

    /// A listener that does nothing until `start()`.
    public init(
        _ settings: Settings,
        onNotification: @escaping @Loop (PostgresNotification) -> Void,
        onStateChange: @escaping @Loop (Bool) -> Void,
        onWindow: @escaping @Loop (UInt64) -> Void = { _ in }
    ) {
        self.settings = settings
        self.onNotification = onNotification
        self.onStateChange = onStateChange
        self.onWindow = onWindow
    }

    /// Connects and listens, and keeps doing so until `stop()`.
    public func start() {
        guard task == nil, !stopping else { return }
        task = Task.onLoop { await self.run() }
    }

    /// Closes the connection and stops reconnecting; returns once the listener has stopped.
    public func stop() async {
        stopping = true
        connection?.close()
        wake()
        await task?.value
        answerDeadline.close()
    }

    // MARK: - Supervision

    private func run() async {
        var delay = settings.retryDelayMs
        while !stopping {
            if let connection = await listen() {
                delay = settings.retryDelayMs
                await supervise(connection)
                continue  // a connection that was listening is replaced at once
            }
            guard !stopping else { break }
            await wait(milliseconds: delay)
            delay = min(delay * 2, settings.maxRetryDelayMs)
        }
        setListening(false)
    }

    /// Opens a connection and `LISTEN`s on every channel; nil (logged) when either fails.
    private func listen() async -> PostgresConnection? {
        do {
            let connection = try await PostgresConnection.connect(
                settings.conninfo, timeoutMs: settings.connectTimeoutMs, applicationName: settings.applicationName)
            self.connection = connection
            connection.onNotification = { [weak self] notification in self?.onNotification(notification) }
            connection.onClose = { [weak self] _ in
                self?.setListening(false)
                self?.wake()
            }
            let script = settings.channels.map { "LISTEN \(Self.quoted($0));" }.joined(separator: " ")
            let sent = EventLoop.shared.now
            try await withDeadline(connection) { _ = try await connection.simpleQuery(script) }
            guard !stopping, !connection.isClosed else { throw PostgresError(kind: .connection, message: "the listener stopped") }
            answered(sentAt: sent)
            Log.info("postgres_listening", ["backend_pid": connection.backendPID, "channels": settings.channels.joined(separator: ",")])
            return connection
        } catch {
            if !stopping { Log.warning("postgres_listen_failed", ["error": (error as? PostgresError)?.message ?? "\(error)"]) }
            connection?.close()
            connection = nil
            return nil
        }
    }

    /// Pings the connection every `pingIntervalMs` until it closes, fails to answer in time, or the listener stops.
    private func supervise(_ connection: PostgresConnection) async {
        while !stopping, !connection.isClosed {
            await wait(milliseconds: settings.pingIntervalMs)
            guard !stopping, !connection.isClosed else { break }
            do {
                let sent = EventLoop.shared.now
                try await withDeadline(connection) { _ = try await connection.query("SELECT 1") }
                guard !stopping, !connection.isClosed else { break }
                answered(sentAt: sent)
            } catch {
                break
            }
        }
        answerDeadline.stop()
        connection.close()
        self.connection = nil
    }

    /// A query sent at `sent` (loop time, ms) answered on the live connection: every notification committed before then has
    /// been handed over (the server sends them ahead of a query's answer, or at once while idle). Listening,
    /// unless `answerWindowMs` has already passed since `sent`; then listening ends when it does.
    private func answered(sentAt sent: UInt64) {
        guard let window = settings.answerWindowMs else { return setListening(true) }
        let elapsed = EventLoop.shared.now &- sent
        guard elapsed < window else { return }
        onWindow(sent + window)
        setListening(true)
        answerDeadline.start(after: window - elapsed) { [weak self] in
            guard let self, self.isListening else { return }
            Log.warning("postgres_listener_stalled", ["backend_pid": self.connection?.backendPID ?? 0, "window_ms": window])
            self.setListening(false)
        }
    }

    /// Runs `body` on `connection`, closing the connection (which fails `body`) when it takes longer than
    /// `pingTimeoutMs`.
    private func withDeadline(_ connection: PostgresConnection, _ body: () async throws -> Void) async throws {
        let deadline = LoopTimer()
        defer { deadline.close() }
        deadline.start(after: settings.pingTimeoutMs) { [weak connection] in
            Log.warning("postgres_listener_unresponsive", ["backend_pid": connection?.backendPID ?? 0])
            connection?.close()
        }
        try await body()
    }

    private func setListening(_ listening: Bool) {
        guard listening != isListening else { return }
        isListening = listening
        onStateChange(listening)
    }

    // MARK: - Waiting

    /// Suspends for `milliseconds`, or until `wake()`.
    private func wait(milliseconds: UInt64) async {
        guard !stopping else { return }
        let timer = LoopTimer()
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            pause = (timer, continuation)
            timer.start(after: milliseconds) { [weak self] in self?.wake() }
        }
    }

    /// Ends the current wait early, if there is one.
    private func wake() {
        guard let (timer, continuation) = pause else { return }
        pause = nil
        timer.close()
        continuation.resume()
    }

    /// `name` as a quoted SQL identifier.
    nonisolated static func quoted(_ name: String) -> String {
        "\"" + name.replacingOccurrences(of: "\"", with: "\"\"") + "\""
    }
}
