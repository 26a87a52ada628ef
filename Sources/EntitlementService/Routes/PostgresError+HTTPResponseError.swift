import ServiceRuntime

/// How a database failure answers a request: a database that does not answer (in time: unreachable, or a
/// statement cancelled at `statement_timeout` or a lock wait at `lock_timeout`) is a 503 with `Retry-After` and a
/// warning in the log (`database_unavailable`); any other failure is the generic 500 and
/// an error in the log (`handler_failed`). The server's own words may quote row values, so they go to the
/// log only.
///
/// (`public` only because the runtime's protocol and type are: a conformance's members must be as visible.)
extension PostgresError: HTTPResponseError {
    public var response: HTTPResponse {
        answersLater ? Self.unavailableResponse : ProblemError.internalError.response
    }

    public var logEvent: HTTPErrorLogEvent? {
        answersLater ? HTTPErrorLogEvent(.warning, "database_unavailable") : HTTPErrorLogEvent(.error, "handler_failed")
    }

    /// The same request may succeed later: the database was out of reach or out of time.
    private var answersLater: Bool { isUnavailable || isTimeout }

    /// Made once: every request waiting on a database that is down gets it.
    private static let unavailableResponse =
        ProblemError.unavailable("The database does not answer; try again later.", retryAfterSeconds: 5).response
}
