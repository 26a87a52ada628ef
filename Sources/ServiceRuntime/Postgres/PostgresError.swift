/// A failure of the PostgreSQL client: a server error with its SQLSTATE, a lost connection, a timeout, a
/// parameter that cannot be sent, or a value that cannot be read as the requested type.
///
/// `message`, `detail` and `hint` are libpq's and the server's own words, kept for the log. They may quote
/// row values (a duplicate key, for instance), so they belong in logs, not in client responses.
public struct PostgresError: Error, Sendable, CustomStringConvertible {
    /// Where the failure comes from.
    public enum Kind: Sendable, Equatable {
        /// The server rejected a statement; `sqlState` says why.
        case server
        /// The connection could not be made, broke, or is closed.
        case connection
        /// A connect or pool acquire did not finish in time.
        case timeout
        /// A parameter or statement cannot be sent as given (a NUL byte, too many parameters).
        case invalidParameter
        /// A column value is NULL, missing or not of the requested type.
        case decoding
        /// The server answered with something this client does not handle (COPY).
        case unsupported
    }

    /// Where the failure comes from.
    public let kind: Kind
    /// The five-character SQLSTATE for server errors, such as `23505`.
    public let sqlState: String?
    /// The primary message.
    public let message: String
    /// The server's DETAIL line, if any.
    public let detail: String?
    /// The server's HINT line, if any.
    public let hint: String?
    /// The constraint a constraint violation names, if any.
    public let constraint: String?

    /// An error; the client builds these from libpq, callers may build them for tests.
    public init(kind: Kind, message: String, sqlState: String? = nil, detail: String? = nil, hint: String? = nil, constraint: String? = nil) {
        self.kind = kind
        self.message = message
        self.sqlState = sqlState
        self.detail = detail
        self.hint = hint
        self.constraint = constraint
    }

    /// The database could not be reached (in time): the same request may succeed later.
    public var isUnavailable: Bool { kind == .connection || kind == .timeout }
    /// `23505`: a unique or primary-key constraint rejected the row.
    public var isUniqueViolation: Bool { sqlState == "23505" }
    /// The server refused to run a prepared statement whose plan no longer fits the tables (`0A000`, "cached
    /// plan must not change result type": a migration changed a column's type under a running process).
    public var isStalePreparedPlan: Bool { sqlState == "0A000" && message.contains("cached plan") }
    /// `40001`: a serializable or repeatable-read transaction must be retried.
    public var isSerializationFailure: Bool { sqlState == "40001" }
    /// A statement, lock or connect timeout: `57014` (statement_timeout, cancel), `55P03` (lock_timeout) or a
    /// client-side time limit.
    public var isTimeout: Bool { kind == .timeout || sqlState == "57014" || sqlState == "55P03" }
    /// The connection is gone or unusable: a client-side connection failure, SQLSTATE class `08`, or the
    /// server shutting down (`57P01`–`57P03`). Such a connection is discarded, never reused.
    public var isConnectionFailure: Bool {
        if kind == .connection { return true }
        guard let sqlState else { return false }
        return sqlState.hasPrefix("08") || ["57P01", "57P02", "57P03"].contains(sqlState)
    }

    public var description: String {
        var text = "PostgreSQL"
        if let sqlState { text += " error \(sqlState)" } else { text += " \(kind) error" }
        text += ": \(message)"
        if let detail { text += " (detail: \(detail))" }
        if let hint { text += " (hint: \(hint))" }
        return text
    }
}
