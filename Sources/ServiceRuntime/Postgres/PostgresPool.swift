/// A fixed-size set of `PostgresConnection`s shared by the whole service.
///
/// Connections open lazily, up to `size`. A caller that finds none free waits in a FIFO queue, for at most
/// `acquireTimeoutMs`. A connection that broke (closed, `PQstatus` bad, a connection-class error) or that
/// comes back with a transaction still open is closed instead of reused, and its slot is opened afresh on
/// the next demand, so the pool recovers by itself after the server restarts.
///
/// Read-only transactions known up front (`readTransaction(_:isolation:)`) that wait for a connection are
/// answered together: the caller that gets a connection also takes the read-only transactions of the same
/// isolation queued behind it (up to `readsPerRoundTrip`) and runs them all as one read-only transaction in
/// one round trip. They share its snapshot, taken after every one of them was asked for: each sees at least
/// what it would have seen alone.
@Loop
public final class PostgresPool {
    /// The most connections open at once.
    public let size: Int
    private let conninfo: String
    private let applicationName: String
    private let connectTimeoutMs: UInt64
    private let statementTimeoutMs: Int?
    private let acquireTimeoutMs: UInt64?
    /// Each connection's answer timeout (`PostgresConnection.answerTimeoutMs`): the statement timeout and 5 s
    /// more, so a server that stopped answering fails its callers (503) instead of holding them forever; none
    /// without a statement timeout. A caller may lift it on the connection it holds (the migrator); it is set
    /// again when the connection comes back.
    private var answerTimeoutMs: UInt64? { statementTimeoutMs.map { UInt64(max(0, $0)) + 5_000 } }

    /// Connections not lent out, most recently returned last.
    private var idle: [PostgresConnection] = []
    /// Connections open or being opened, idle or lent out; never more than `size`.
    private var open = 0
    /// Callers waiting for a connection, oldest first.
    private var waiters: [Waiter] = []
    private var lastWaiterID = 0
    private var closed = false
    private var drainWaiters: [CheckedContinuation<Void, Never>] = []
    /// When a lent connection last came back usable (loop clock, ms): the server answered then.
    private var lastAnswer: UInt64?

    /// Connections currently lent out.
    public private(set) var inUse = 0
    /// Callers currently waiting for a connection.
    public var waiting: Int { waiters.count }
    /// Read-only transactions answered in another caller's round trip so far.
    public private(set) var readsAnsweredTogether = 0

    /// The most read-only transactions sent in one round trip.
    public let readsPerRoundTrip = 32

    /// What a waiting caller is given: a connection someone returned, a free slot to open one in, or (for a
    /// queued read-only transaction) its results, sent by another caller together with its own.
    /// What a caller comes away with: a connection, or (a queued read) the results another caller got for it.
    private enum Lent {
        case connection(PostgresConnection)
        case answered([PostgresResult])
    }

    private enum Grant {
        case connection(PostgresConnection)
        case slot
        case answered([PostgresResult])
    }

    private struct Waiter {
        let id: Int
        let continuation: CheckedContinuation<Grant, Error>
        let timer: LoopTimer?
        /// The read-only transaction the caller waits to run, which another caller may run for it.
        let read: QueuedRead?
    }

    /// A read-only transaction known up front: its statements, run between BEGIN … READ ONLY and COMMIT.
    struct QueuedRead {
        let statements: [PostgresStatement]
        let isolation: PostgresIsolationLevel

        /// BEGIN, the statements of `reads` (all of `isolation`) in order, COMMIT.
        static func batch(_ reads: [QueuedRead], isolation: PostgresIsolationLevel) -> [PostgresStatement] {
            [PostgresStatement(isolation.readOnlyBeginStatement)] + reads.flatMap(\.statements) + [PostgresStatement("COMMIT")]
        }
    }

    /// - Parameters:
    ///   - conninfo: a libpq connection string or `postgresql://` URI.
    ///   - size: the most connections open at once.
    ///   - applicationName: shown in `pg_stat_activity`, unless `conninfo` names one.
    ///   - connectTimeoutMs: time allowed to open one connection.
    ///   - statementTimeoutMs: `statement_timeout` of every connection; `nil` keeps the server's.
    ///   - acquireTimeoutMs: how long a caller may wait for a free connection; `nil` waits indefinitely.
    public init(
        conninfo: String,
        size: Int = 8,
        applicationName: String = "entitlement-service",
        connectTimeoutMs: UInt64 = 10_000,
        statementTimeoutMs: Int? = 30_000,
        acquireTimeoutMs: UInt64? = 10_000
    ) {
        precondition(size > 0, "a pool needs at least one connection")
        self.conninfo = conninfo
        self.size = size
        self.applicationName = applicationName
        self.connectTimeoutMs = connectTimeoutMs
        self.statementTimeoutMs = statementTimeoutMs
        self.acquireTimeoutMs = acquireTimeoutMs
    }

    /// Runs one statement on a free connection.
    public func query(_ sql: String, _ parameters: [any PostgresEncodable]) async throws -> PostgresResult {
        try await withConnection { try await $0.query(sql, parameters) }
    }

    /// Runs one statement on a free connection, parameters given inline.
    public func query(_ sql: String, _ parameters: any PostgresEncodable...) async throws -> PostgresResult {
        try await query(sql, parameters)
    }

    /// One round trip on a free connection, connection included, within `timeoutMs`: whether the server answers
    /// (readiness checks). A server that answers nothing fails the ping at `timeoutMs`; the round trip itself
    /// goes on until the connection's answer timeout gives it up. With every connection lent out, a connection
    /// that came back within `timeoutMs` is the answer: a busy pool is no silent server, and the ping does not
    /// queue behind the requests keeping it busy.
    public func ping(timeoutMs: UInt64 = 3_000) async throws {
        if idle.isEmpty, open == size, let lastAnswer, EventLoop.shared.now - lastAnswer < timeoutMs { return }
        let answer = await LoopTimer.value(of: { () async -> Result<Void, any Error> in
            do {
                _ = try await self.query("SELECT 1", [])
                return .success(())
            } catch {
                return .failure(error)
            }
        }, waitingAtMost: timeoutMs)
        guard let answer else { throw PostgresError(kind: .timeout, message: "the server did not answer a ping within \(timeoutMs) ms") }
        try answer.get()
    }

    /// Lends a connection to `body` and takes it back afterwards, whatever `body` does.
    /// - Throws: `body`'s error, or a `PostgresError` when no connection could be had (`.timeout` after
    ///   `acquireTimeoutMs`, `.connection` when opening one failed or the pool is closed).
    public func withConnection<T>(_ body: @Loop (PostgresConnection) async throws -> T) async throws -> T {
        let connection = try await acquire()
        do {
            let value = try await body(connection)
            release(connection, broken: false)
            return value
        } catch {
            release(connection, broken: (error as? PostgresError)?.isConnectionFailure ?? false)
            throw error
        }
    }

    /// Stops lending: waiting callers fail, idle connections close, and lent ones close when they come back.
    /// Returns once every connection is closed.
    public func close() async {
        if !closed {
            closed = true
            let waiting = waiters
            waiters.removeAll()
            for waiter in waiting {
                waiter.timer?.close()
                waiter.continuation.resume(throwing: PostgresError(kind: .connection, message: "the connection pool was closed"))
            }
            for connection in idle { connection.close() }
            open -= idle.count
            idle.removeAll()
        }
        if open > 0 {
            await withCheckedContinuation { drainWaiters.append($0) }
        }
    }

    // MARK: - Lending

    private func acquire() async throws -> PostgresConnection {
        switch try await acquire(read: nil) {
        case .connection(let connection): return connection
        case .answered: preconditionFailure("only a queued read is answered")
        }
    }

    /// A connection for the caller; a queued `read` may instead be answered by another caller's round trip.
    private func acquire(read: QueuedRead?) async throws -> Lent {
        // The server refused this caller a new connection while others of ours are open: it waits for one of them.
        var refused = false
        while true {
            guard !closed else { throw PostgresError(kind: .connection, message: "the connection pool is closed") }
            let grant: Grant
            if let connection = takeIdle() {
                grant = .connection(connection)
            } else if open < size && !refused {
                open += 1
                grant = .slot
            } else {
                grant = try await wait(read: read)
            }
            switch grant {
            case .answered(let results):
                return .answered(results)
            case .connection(let connection):
                if connection.isUsable { return .connection(connection) }
                // Broke while being handed over: drop it and try again.
                inUse -= 1
                discard(connection)
            case .slot:
                do {
                    let connection = try await PostgresConnection.connect(
                        conninfo, timeoutMs: connectTimeoutMs, applicationName: applicationName,
                        statementTimeoutMs: statementTimeoutMs)
                    connection.answerTimeoutMs = answerTimeoutMs
                    inUse += 1
                    return .connection(connection)
                } catch {
                    open -= 1
                    // Connections of ours are lent out, so the server is up and refused one more (its
                    // max_connections, say): wait for one of them to come back, as when the pool is full (the acquire
                    // timeout still bounds the wait). The slot stays free: handing it to the next waiter would only
                    // have that one refused too. With none lent out, the server is down: fail at once.
                    guard inUse > 0, !closed else {
                        slotFreed()
                        throw error
                    }
                    Log.warning("postgres_connect_refused", ["in_use": inUse, "error": String(describing: error)])
                    refused = true
                }
            }
        }
    }

    /// The most recently returned usable idle connection, counted as lent; broken ones found on the way close.
    private func takeIdle() -> PostgresConnection? {
        while let connection = idle.popLast() {
            if connection.isUsable {
                inUse += 1
                return connection
            }
            connection.close()
            open -= 1
        }
        return nil
    }

    /// Queues the caller until a connection or a slot is handed to it, or `acquireTimeoutMs` passes.
    private func wait(read: QueuedRead?) async throws -> Grant {
        lastWaiterID += 1
        let id = lastWaiterID
        return try await withCheckedThrowingContinuation { continuation in
            var timer: LoopTimer?
            if let acquireTimeoutMs {
                let deadline = LoopTimer()
                deadline.start(after: acquireTimeoutMs) { [weak self] in self?.timeOut(waiter: id) }
                timer = deadline
            }
            waiters.append(Waiter(id: id, continuation: continuation, timer: timer, read: read))
        }
    }

    private func timeOut(waiter id: Int) {
        guard let index = waiters.firstIndex(where: { $0.id == id }) else { return }
        let waiter = waiters.remove(at: index)
        waiter.timer?.close()
        waiter.continuation.resume(throwing: PostgresError(
            kind: .timeout,
            message: "no database connection became free within \(acquireTimeoutMs ?? 0) ms "
                + "(pool size \(size), \(inUse) in use, \(waiters.count) still waiting)"))
    }

    /// Takes a lent connection back: hands it to the oldest waiter, keeps it idle, or closes it when it is
    /// broken, was reported broken, or still has a transaction open.
    private func release(_ connection: PostgresConnection, broken: Bool) {
        inUse -= 1
        connection.answerTimeoutMs = answerTimeoutMs
        if !broken && connection.isUsable { lastAnswer = EventLoop.shared.now }
        guard !closed, !broken, connection.isUsable, connection.transactionStatus == .idle else {
            if connection.transactionStatus == .inTransaction || connection.transactionStatus == .failed {
                Log.warning("postgres_pool_discarded_open_transaction", ["backend_pid": connection.backendPID])
            }
            discard(connection)
            return
        }
        if waiters.isEmpty {
            idle.append(connection)
            return
        }
        let waiter = waiters.removeFirst()
        waiter.timer?.close()
        inUse += 1
        waiter.continuation.resume(returning: .connection(connection))
    }

    // MARK: - Read-only transactions, several per round trip

    /// Runs `read` on a connection of its own, or queues it; whoever gets a connection first runs it together
    /// with the reads queued behind it.
    func run(_ read: QueuedRead) async throws -> [PostgresResult] {
        switch try await acquire(read: read) {
        case .answered(let results): return results
        case .connection(let connection): return try await serve(read, with: takeQueuedReads(of: read.isolation), on: connection)
        }
    }

    /// Up to `readsPerRoundTrip - 1` queued reads of `isolation`, oldest first, taken out of the queue.
    private func takeQueuedReads(of isolation: PostgresIsolationLevel) -> [Waiter] {
        var taken: [Waiter] = []
        var kept: [Waiter] = []
        for waiter in waiters {
            if waiter.read?.isolation == isolation, taken.count < readsPerRoundTrip - 1 {
                waiter.timer?.close()
                taken.append(waiter)
            } else {
                kept.append(waiter)
            }
        }
        waiters = kept
        return taken
    }

    /// Sends `read` and `companions` as one transaction in one pipeline (one sync point) on `connection`,
    /// answers the companions and returns `read`'s results. When the pipeline fails (every statement after a
    /// failure is skipped), each read runs again as a transaction of its own, so that each gets its own
    /// answer: reads, so running one twice changes nothing.
    private func serve(_ read: QueuedRead, with companions: [Waiter], on connection: PostgresConnection) async throws -> [PostgresResult] {
        let reads = [read] + companions.compactMap(\.read)
        var answers: [Result<[PostgresResult], any Error>]
        do {
            var results = try await connection.pipeline(QueuedRead.batch(reads, isolation: read.isolation)).dropFirst()
            answers = reads.map { read in
                defer { results = results.dropFirst(read.statements.count) }
                return .success(Array(results.prefix(read.statements.count)))
            }
        } catch {
            answers = []
            for read in reads {
                await Self.rollBack(connection)
                guard connection.isUsable else {
                    answers.append(.failure(error))
                    continue
                }
                do {
                    answers.append(.success(Array(try await connection.pipeline(QueuedRead.batch([read], isolation: read.isolation))
                        .dropFirst().dropLast())))
                } catch {
                    answers.append(.failure(error))
                }
            }
        }
        readsAnsweredTogether += companions.count
        for (waiter, answer) in zip(companions, answers.dropFirst()) {
            waiter.continuation.resume(with: answer.map(Grant.answered))
        }
        release(connection, broken: false)
        return try answers[0].get()
    }

    /// ROLLBACK when a transaction is still open; a connection that cannot do it is discarded on release.
    static func rollBack(_ connection: PostgresConnection) async {
        guard connection.isUsable, connection.transactionStatus != .idle else { return }
        _ = try? await connection.query("ROLLBACK")
    }

    private func discard(_ connection: PostgresConnection) {
        connection.close()
        open -= 1
        slotFreed()
    }

    /// A slot became free: the oldest waiter may open a connection in it; a closing pool may finish.
    private func slotFreed() {
        if closed {
            guard open == 0 else { return }
            let done = drainWaiters
            drainWaiters.removeAll()
            for waiter in done { waiter.resume() }
            return
        }
        guard !waiters.isEmpty, open < size else { return }
        let waiter = waiters.removeFirst()
        waiter.timer?.close()
        open += 1
        waiter.continuation.resume(returning: .slot)
    }
}
