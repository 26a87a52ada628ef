import CPostgres
import Foundation

/// One PostgreSQL connection driven by libpq's asynchronous API on the uv loop; nothing here blocks (host
/// names are resolved off the loop first; a conninfo listing several hosts is left to libpq, whose own
/// lookup of those names does block).
///
/// The connection is the I/O shell around `PostgresConnectionStateMachine`: socket readiness and libpq's
/// answers go into the machine as events, and the connection carries out the actions it returns. Requests
/// may be submitted concurrently; they run one after another in submission order.
@Loop
public final class PostgresConnection {
    /// Whether libpq reads `conninfo` (a key=value string or `postgresql://` URI), for checking a setting at
    /// start-up without connecting.
    public nonisolated static func acceptsConninfo(_ conninfo: String) -> Bool {
        (try? PostgresConnectionSettings(conninfo: conninfo)) != nil
    }

    private typealias Machine = PostgresConnectionStateMachine

    /// Whether the server considers a transaction open on this connection (`PQtransactionStatus`).
    public enum TransactionStatus: Sendable, Equatable {
        /// No transaction is open.
        case idle
        /// A command is running.
        case active
        /// Inside a transaction block.
        case inTransaction
        /// Inside a failed transaction block: only ROLLBACK helps.
        case failed
        /// The connection is bad or closed.
        case unknown
    }

    private enum Body {
        case extended(EncodedStatement)
        case simple(String)
        case pipeline([EncodedStatement])

        var kind: Machine.RequestKind {
            if case .pipeline = self { .pipeline } else { .single }
        }
    }

    /// A submitted request, its caller, and what the server has answered so far. A class: each result is
    /// added where it lies, not through a copy of the request taken out of and put back into `pending`.
    private final class Pending {
        let body: Body
        let continuation: CheckedContinuation<[PostgresResult], Error>
        var results: [PostgresResult] = []
        var error: PostgresError?
        /// Statements this pipeline prepares, with the position of each prepare step's own result in `results`
        /// (callers never see those). Each one the server accepted is remembered as prepared, even when a later
        /// step fails: prepared statements outlive the failed implicit transaction.
        var preparing: [(sql: String, name: String, position: Int)] = []

        init(body: Body, continuation: CheckedContinuation<[PostgresResult], Error>) {
            self.body = body
            self.continuation = continuation
            if case .pipeline(let statements) = body { results.reserveCapacity(statements.count) }
        }
    }

    /// Statements prepared on this connection by pipelines (SQL text → statement name), so PostgreSQL parses
    /// and plans each once per connection instead of once per execution. Bounded: past the limit, statements
    /// run unnamed as before.
    private var prepared: [StatementText: String] = [:]
    private var preparedCount = 0
    private static let maximumPrepared = 128

    /// An SQL text as a key of `prepared`: hashed by its length and its first and last bytes, compared in
    /// full. Statements are long and every execution looks its text up again; hashing all of it was 1 % of a
    /// snapshot read.
    private struct StatementText: Hashable {
        let sql: String

        func hash(into hasher: inout Hasher) {
            var sql = sql
            sql.withUTF8 { bytes in
                hasher.combine(bytes.count)
                hasher.combine(bytes: UnsafeRawBufferPointer(UnsafeBufferPointer(rebasing: bytes.prefix(32))))
                hasher.combine(bytes: UnsafeRawBufferPointer(UnsafeBufferPointer(rebasing: bytes.suffix(32))))
            }
        }
    }

    private var connection: OpaquePointer?
    private var machine = Machine()
    private var watcher: PostgresSocketWatcher?
    private var connectTimer: LoopTimer?
    private var connectTimeoutMs: UInt64 = 0
    private var connecting: CheckedContinuation<Void, Error>?
    private var pending: [Int: Pending] = [:]
    private var lastRequestID = 0
    /// Why the connection closed; set once, then every request fails with it.
    private var closeError: PostgresError?

    /// The process ID of the server backend serving this connection.
    public private(set) var backendPID: Int32 = 0

    /// How long a request may wait with nothing at all from the server before the connection is given up
    /// (closed, its requests failing with `.timeout`); nil: as long as it takes. A server that stopped (a frozen
    /// host, a stopped process) while its kernel still acknowledges is noticed by neither TCP keepalives nor the
    /// user timeout. Set it above the longest statement expected (`statement_timeout`).
    public var answerTimeoutMs: UInt64?
    /// The answer timer, made on first use; it fires at `answerTimerDue` and moves only forward lazily: each send
    /// or readable socket just notes `lastHeard`, so a request costs no timer call while the server answers.
    private var answerTimer: LoopTimer?
    private var answerTimerDue: UInt64?
    /// When the server last showed life, or a request was sent (loop clock, ms).
    private var lastHeard: UInt64 = 0

    /// Called with each notification (`LISTEN`/`NOTIFY`) as soon as it has been read, in arrival order.
    public var onNotification: (@Loop (PostgresNotification) -> Void)?
    /// Called once when the connection closes, for any reason, with the error its requests now fail with.
    public var onClose: (@Loop (PostgresError) -> Void)?

    private init() {}

    /// A connection dropped without `close()` still stops its watcher and finishes libpq's connection.
    isolated deinit {
        if closeError == nil {
            shutDown(with: PostgresError(kind: .connection, message: "the connection was released without being closed"))
        }
    }

    /// Opens a connection and waits until it is ready for queries.
    ///
    /// - Parameters:
    ///   - conninfo: a libpq connection string or `postgresql://` URI.
    ///   - timeoutMs: the time allowed for the handshake (host name lookup excluded).
    ///   - applicationName: shown in `pg_stat_activity`, unless `conninfo` names one.
    ///   - statementTimeoutMs: the session's `statement_timeout`; `nil` keeps the server's.
    /// - Throws: `PostgresError` with libpq's message (`.connection`), or `.timeout`.
    public static func connect(
        _ conninfo: String,
        timeoutMs: UInt64 = 10_000,
        applicationName: String = "entitlement-service",
        statementTimeoutMs: Int? = nil
    ) async throws -> PostgresConnection {
        var settings = try PostgresConnectionSettings(conninfo: conninfo)
        settings.applyDefaults(applicationName: applicationName, statementTimeoutMs: statementTimeoutMs)
        try await settings.resolveHost()
        let connection = PostgresConnection()
        try await connection.start(settings, timeoutMs: timeoutMs)
        return connection
    }

    /// Runs one statement with bound parameters (`$1`, `$2`…, text format) and returns its result.
    /// - Throws: `PostgresError`: `.server` with the SQLSTATE, `.connection`, or `.invalidParameter`.
    public func query(_ sql: String, _ parameters: [any PostgresEncodable]) async throws -> PostgresResult {
        let results = try await submit(.extended(EncodedStatement(sql, parameters)))
        guard let result = results.first else {
            throw PostgresError(kind: .unsupported, message: "the server returned no result for the statement")
        }
        return result
    }

    /// Runs one statement with bound parameters given inline: `query("SELECT $1::int", 1)`.
    public func query(_ sql: String, _ parameters: any PostgresEncodable...) async throws -> PostgresResult {
        try await query(sql, parameters)
    }

    /// Runs a script of one or more statements through the simple query protocol, without parameters, and
    /// returns one result per statement. For trusted SQL such as migrations; never build `sql` from input.
    /// The first failing statement stops the script and is thrown.
    public func simpleQuery(_ sql: String) async throws -> [PostgresResult] {
        guard !sql.containsNULByte else {
            throw PostgresError(kind: .invalidParameter, message: "the SQL text contains a NUL byte")
        }
        return try await submit(.simple(sql))
    }

    /// Sends all statements in one round trip (libpq pipeline mode, one sync point) and returns one result
    /// per statement. The statements run as one implicit transaction unless they contain their own
    /// transaction control; after the first failure the rest are skipped and that failure is thrown.
    public func pipeline(_ statements: [PostgresStatement]) async throws -> [PostgresResult] {
        guard !statements.isEmpty else { return [] }
        return try await submit(.pipeline(statements.map(EncodedStatement.init)))
    }

    /// Closes the connection; requests still pending fail with a connection error.
    public func close() {
        run(.closeRequested)
    }

    /// True once the connection is closed, by request or because it failed.
    public var isClosed: Bool { closeError != nil }

    /// True while the connection is open and libpq considers it good.
    public var isUsable: Bool {
        guard closeError == nil, let connection else { return false }
        return PQstatus(connection) == CONNECTION_OK
    }

    /// The server's view of the current transaction.
    public var transactionStatus: TransactionStatus {
        guard closeError == nil, let connection else { return .unknown }
        switch PQtransactionStatus(connection) {
        case PQTRANS_IDLE: return .idle
        case PQTRANS_ACTIVE: return .active
        case PQTRANS_INTRANS: return .inTransaction
        case PQTRANS_INERROR: return .failed
        default: return .unknown
        }
    }

    // MARK: - Starting

    private func start(_ settings: PostgresConnectionSettings, timeoutMs: UInt64) async throws {
        guard let connection = settings.withCArrays({ PQconnectStartParams($0, $1, 0) }) else {
            throw PostgresError(kind: .connection, message: "out of memory while starting a connection")
        }
        self.connection = connection
        PQsetNoticeReceiver(connection, PostgresLibpq.noticeReceiver, nil)
        guard PQstatus(connection) != CONNECTION_BAD, PQsetnonblocking(connection, 1) == 0 else {
            let error = PostgresLibpq.connectionError(connection, fallback: "could not start the connection")
            shutDown(with: error)
            throw error
        }
        connectTimeoutMs = timeoutMs
        let timer = LoopTimer()
        connectTimer = timer
        timer.start(after: timeoutMs) { [weak self] in self?.run(.timedOut) }
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, Error>) in
            connecting = continuation
            run(.connectStarted)
        }
    }

    // MARK: - Requests

    private func submit(_ body: Body) async throws -> [PostgresResult] {
        if let closeError { throw closeError }
        lastRequestID += 1
        let request = Machine.Request(id: lastRequestID, kind: body.kind)
        return try await withCheckedThrowingContinuation { continuation in
            pending[request.id] = Pending(body: body, continuation: continuation)
            run(.requestEnqueued(request))
        }
    }

    // MARK: - Running the machine

    /// Feeds `event` to the machine and carries out actions until one produces no further event.
    private func run(_ event: Machine.Event) {
        var next: Machine.Event? = event
        while let event = next {
            next = perform(machine.handle(event))
        }
    }

    private func perform(_ action: Machine.Action) -> Machine.Event? {
        switch action {
        case .none:
            return nil
        case .watch(let interest):
            return watch(interest)
        case .pollConnect:
            return pollConnect()
        case .connected(let next):
            connectTimer?.close()
            connectTimer = nil
            if let connection { backendPID = PQbackendPID(connection) }
            connecting?.resume()
            connecting = nil
            return sendOrIdle(next)
        case .send(let request):
            heardFromServer()
            return send(request)
        case .flush:
            switch PQflush(connection) {
            case 0: return .flushed(.done)
            case 1: return .flushed(.pending)
            default: return .flushed(.failed)
            }
        case .consumeInput:
            heardFromServer()
            let consumed = PQconsumeInput(connection) == 1
            if consumed { deliverNotifications() }
            return .inputConsumed(consumed)
        case .fetchResult(let request):
            return fetch(for: request)
        case .discardInput:
            while PQisBusy(connection) == 0, let stray = PQgetResult(connection) {
                PQclear(stray)
            }
            return watch(.read)
        case .exitPipeline:
            return .pipelineExited(PQexitPipelineMode(connection) == 1)
        case .deliver(let request, let next):
            if let done = pending.removeValue(forKey: request.id) {
                // Up to the first failure every step has its result here, in order; after it, none has.
                for step in done.preparing where step.position < done.results.count { prepared[StatementText(sql: step.sql)] = step.name }
                if let error = done.error {
                    if error.isStalePreparedPlan, !prepared.isEmpty {
                        // Prepared before the tables changed: prepared again under new names from the next use on (the
                        // old ones stay on the server until the connection ends: one set per such migration).
                        Log.warning("postgres_prepared_statements_reset", ["backend_pid": backendPID, "statements": prepared.count])
                        prepared.removeAll()
                    }
                    done.continuation.resume(throwing: error)
                } else {
                    let hidden = Set(done.preparing.map(\.position))
                    let results = hidden.isEmpty ? done.results
                        : done.results.enumerated().filter { !hidden.contains($0.offset) }.map(\.element)
                    done.continuation.resume(returning: results)
                }
            }
            return sendOrIdle(next)
        case .fail(let request, let next):
            let error = closeError ?? PostgresLibpq.connectionError(connection, fallback: "the request could not be sent")
            pending.removeValue(forKey: request.id)?.continuation.resume(throwing: error)
            return sendOrIdle(next)
        case .close(let reason):
            let error = error(for: reason)
            if reason != .requested, connecting == nil {
                Log.warning("postgres_connection_lost", ["backend_pid": backendPID, "error": error.message])
            }
            shutDown(with: error)
            return nil
        }
    }

    private func sendOrIdle(_ next: Machine.Request?) -> Machine.Event? {
        if let next { return send(next) }
        return watch(.read)
    }

    /// Watches libpq's current socket, replacing the watcher when libpq has moved to another socket.
    private func watch(_ interest: Machine.Interest) -> Machine.Event? {
        guard let connection else { return nil }
        let socket = PQsocket(connection)
        if let watcher, watcher.socket == socket {
            watcher.watch(interest)
            return nil
        }
        watcher?.close()
        watcher = nil
        guard socket >= 0, let replacement = PostgresSocketWatcher(socket: socket, onReady: { [weak self] readiness in
            switch readiness {
            case .readable: self?.run(.readable)
            case .writable: self?.run(.writable)
            case .failed: self?.run(.socketError)
            }
        }) else { return .watchFailed }
        watcher = replacement
        replacement.watch(interest)
        return nil
    }

    /// Calls `PQconnectPoll` with polling stopped: libpq may close the socket and open another meanwhile.
    private func pollConnect() -> Machine.Event {
        watcher?.watch(.none)
        switch PQconnectPoll(connection) {
        case PGRES_POLLING_READING: return .connectPolled(.reading)
        case PGRES_POLLING_WRITING: return .connectPolled(.writing)
        case PGRES_POLLING_OK: return .connectPolled(.ok)
        default: return .connectPolled(.failed)
        }
    }

    private func send(_ request: Machine.Request) -> Machine.Event {
        guard let body = pending[request.id]?.body else { return .sendFailed(connectionBroken: false) }
        let sent: Bool
        switch body {
        case .extended(let statement):
            sent = sendQueryParams(statement)
        case .simple(let sql):
            sent = PQsendQuery(connection, sql) == 1
        case .pipeline(let statements):
            sent = PQenterPipelineMode(connection) == 1
                && sendPipelined(statements, for: request.id)
                && PQpipelineSync(connection) == 1
        }
        return sent ? .sent : .sendFailed(connectionBroken: PQstatus(connection) != CONNECTION_OK)
    }

    /// Sends a pipeline's statements, each as a prepared statement: prepared in the same pipeline the first
    /// time this connection sees its SQL.
    private func sendPipelined(_ statements: [EncodedStatement], for id: Int) -> Bool {
        guard let connection else { return false }
        var position = 0
        var preparedHere: [StatementText: String] = [:]
        for statement in statements {
            let text = StatementText(sql: statement.sql)
            var name = prepared[text] ?? preparedHere[text]
            if name == nil, prepared.count + preparedHere.count < Self.maximumPrepared {
                preparedCount += 1
                let fresh = "entitlement_statement_\(preparedCount)"
                let accepted = statement.types.withUnsafeBufferPointer { types in
                    PQsendPrepare(connection, fresh, statement.sql, Int32(statement.types.count), types.baseAddress) == 1
                }
                guard accepted else { return false }
                pending[id]?.preparing.append((statement.sql, fresh, position))
                preparedHere[text] = fresh
                position += 1
                name = fresh
            }
            let sent = if let name { Self.withParameterValues(statement.values) { values in
                PQsendQueryPrepared(connection, name, Int32(statement.values.count), values, nil, nil, 0) == 1
            } } else { sendQueryParams(statement) }
            guard sent else { return false }
            position += 1
        }
        return true
    }

    /// Runs `body` with the parameters as C strings (NULL for SQL NULL), freed afterwards.
    private static func withParameterValues<T>(_ values: [String?], _ body: (UnsafePointer<UnsafePointer<CChar>?>?) -> T) -> T {
        let values: [UnsafePointer<CChar>?] = values.map { text in
            text.flatMap { strdup($0) }.map { UnsafePointer($0) }
        }
        defer {
            for value in values { free(UnsafeMutablePointer(mutating: value)) }
        }
        return values.withUnsafeBufferPointer { body($0.baseAddress) }
    }

    /// `PQsendQueryParams` with text-format parameters and results.
    private func sendQueryParams(_ statement: EncodedStatement) -> Bool {
        guard let connection else { return false }
        return statement.types.withUnsafeBufferPointer { types in
            Self.withParameterValues(statement.values) { values in
                PQsendQueryParams(
                    connection, statement.sql, Int32(statement.values.count), types.baseAddress, values, nil, nil, 0) == 1
            }
        }
    }

    /// Takes one result if libpq has it complete, keeping rows or the first error for the request.
    private func fetch(for request: Machine.Request) -> Machine.Event {
        guard PQisBusy(connection) == 0 else { return .busy }
        guard let result = PQgetResult(connection) else { return .fetched(.end) }
        defer { PQclear(result) }
        switch PQresultStatus(result) {
        case PGRES_PIPELINE_SYNC:
            return .fetched(.pipelineSync)
        case PGRES_COPY_IN, PGRES_COPY_OUT, PGRES_COPY_BOTH:
            return .fetched(.unsupported)
        case PGRES_TUPLES_OK, PGRES_COMMAND_OK, PGRES_EMPTY_QUERY, PGRES_SINGLE_TUPLE:
            pending[request.id]?.results.append(PostgresLibpq.result(result))
        case PGRES_PIPELINE_ABORTED:
            break
        default:
            if pending[request.id]?.error == nil {
                pending[request.id]?.error = PostgresLibpq.error(result, connectionBroken: PQstatus(connection) != CONNECTION_OK)
            }
        }
        return .fetched(.result)
    }

    /// Hands every notification libpq has parsed to `onNotification`.
    private func deliverNotifications() {
        while let connection, let notify = PQnotifies(connection) {
            let notification = PostgresNotification(
                channel: String(cString: notify.pointee.relname), payload: String(cString: notify.pointee.extra),
                senderPID: notify.pointee.be_pid)
            PQfreemem(notify)
            onNotification?(notification)
        }
    }

    // MARK: - The answer timeout

    /// Notes that the server answered (or a request starts waiting), arming the answer timer if it is off.
    private func heardFromServer() {
        guard let answerTimeoutMs else { return }
        lastHeard = EventLoop.shared.now
        if answerTimerDue == nil { armAnswerTimer(after: answerTimeoutMs) }
    }

    private func armAnswerTimer(after milliseconds: UInt64) {
        let timer = answerTimer ?? LoopTimer()
        answerTimer = timer
        answerTimerDue = EventLoop.shared.now + milliseconds
        timer.start(after: milliseconds) { [weak self] in self?.answerTimerFired() }
    }

    /// Closes the connection when a request has waited the whole timeout since the server last showed life;
    /// re-arms for the rest of it otherwise, while requests wait.
    private func answerTimerFired() {
        answerTimerDue = nil
        guard let answerTimeoutMs, !pending.isEmpty, closeError == nil else { return }
        let overdue = lastHeard + answerTimeoutMs, now = EventLoop.shared.now
        if now >= overdue {
            run(.answerOverdue)
        } else {
            armAnswerTimer(after: overdue - now)
        }
    }

    // MARK: - Closing

    private func error(for reason: Machine.CloseReason) -> PostgresError {
        switch reason {
        case .requested:
            PostgresError(kind: .connection, message: "the connection was closed")
        case .connectionError:
            PostgresLibpq.connectionError(connection, fallback: "the connection to the server was lost")
        case .connectTimeout:
            PostgresError(kind: .timeout, message: "could not connect to the server within \(connectTimeoutMs) ms")
        case .answerTimeout:
            PostgresError(kind: .timeout, message: "the server sent nothing for \(answerTimeoutMs ?? 0) ms while a request waited; the connection was closed")
        case .unsupportedResult:
            PostgresError(kind: .unsupported, message: "the server started a COPY, which this client does not support; the connection was closed")
        }
    }

    /// Stops polling, then finishes the libpq connection, then fails everyone still waiting.
    private func shutDown(with error: PostgresError) {
        closeError = error
        connectTimer?.close()
        connectTimer = nil
        answerTimer?.close()
        answerTimer = nil
        answerTimerDue = nil
        watcher?.close()
        watcher = nil
        if let connection { PQfinish(connection) }
        connection = nil
        connecting?.resume(throwing: error)
        connecting = nil
        let waiting = pending.sorted { $0.key < $1.key }
        pending.removeAll()
        for (_, request) in waiting {
            request.continuation.resume(throwing: error)
        }
        let closed = onClose
        onNotification = nil
        onClose = nil
        closed?(error)
    }
}
