/// An error that answers the request it ends: a handler or middleware throws it and the client gets
/// `response`. `ProblemError` is one; a library's error (the database's, say) becomes one by a conformance
/// where the service decides how it should be answered.
///
/// Any other error a handler throws is answered with a generic 500 problem and logged (`handler_failed`,
/// with its description), so nothing of it reaches the client.
public protocol HTTPResponseError: Error {
    /// The answer to the client. It must hold nothing secret: no keys, no statements, no stack traces.
    var response: HTTPResponse { get }
    /// The line to log when this error answers a request, or nil when the response says all (a client's
    /// mistake). The line carries the request id, the route, the context's log metadata and the error's
    /// description.
    var logEvent: HTTPErrorLogEvent? { get }
}

extension HTTPResponseError {
    /// No log line by default: the response says all.
    public var logEvent: HTTPErrorLogEvent? { nil }
}

/// The level and name of the log line an error answering a request is worth.
public struct HTTPErrorLogEvent: Sendable, Equatable {
    /// The level the line is logged at; dropped when below `Log.minimum`.
    public var level: Log.Level
    /// The line's `event` name, e.g. `handler_failed`.
    public var event: String

    /// A log event with these values.
    public init(_ level: Log.Level, _ event: String) {
        self.level = level
        self.event = event
    }
}

extension ProblemError: HTTPResponseError {}

/// Thrown by a handler (or a middleware) to close the connection without answering: the client sees the
/// connection end, as if the network broke, and requests it pipelined behind this one are never answered.
/// For fakes and tests of clients (the fake App Store's dropped connection); a real service answers.
///
/// The access log and the metrics record the request with the status `aborted`.
public struct HTTPConnectionAbort: Error, Sendable, Equatable {
    /// The abort; it carries nothing.
    public init() {}
}

/// Turning what a handler or middleware threw into the answer.
enum HTTPErrorAnswer {
    /// The answer to every error that does not render itself, made once.
    static let internalError = ProblemError.internalError.response

    /// `error`'s own response (logged when it asks to be), an abort, or a logged generic 500.
    static func outcome(of error: any Error, _ context: HTTPRequestContext) -> HTTPOutcome {
        if error is HTTPConnectionAbort { return .failure(HTTPConnectionAbort()) }
        guard let rendered = error as? any HTTPResponseError else {
            log(HTTPErrorLogEvent(.error, "handler_failed"), error, context)
            return .success(internalError)
        }
        if let event = rendered.logEvent { log(event, error, context) }
        return .success(rendered.response)
    }

    private static func log(_ event: HTTPErrorLogEvent, _ error: any Error, _ context: HTTPRequestContext) {
        guard var line = Log.Line(event.level, event.event) else { return }
        line.add("request_id", context.requestID)
        line.add("route", context.route)
        for (key, value) in context.logMetadata { line.add(key, value) }
        line.add("error", String(describing: error))
        line.emit()
    }
}
