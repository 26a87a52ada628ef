import CUV

/// An error a handler throws to answer with an RFC 9457 problem document (`application/problem+json`):
/// `{"type", "title", "status", "detail", ...extra}`.
///
/// Only what is in here reaches the client; any other error a handler throws becomes a 500 problem with a
/// generic detail, and its description goes to the log with the request id.
public struct ProblemError: Error, Sendable, Equatable {
    /// The HTTP status of the response.
    public var status: Int
    /// A short summary of the kind of problem; defaults to the status's reason phrase.
    public var title: String
    /// What went wrong with this request, for a human reader. Never a secret, never a stack trace.
    public var detail: String
    /// A URI naming the kind of problem; `about:blank` when the status says it all.
    public var type: String
    /// Extension members such as `apple_status` or `field`. Keys of the core members are ignored.
    public var extra: [String: JSONValue]
    /// Header fields the response carries besides `Content-Type` (`WWW-Authenticate`, `Retry-After`).
    public var headers: HTTPHeaders

    /// A problem with these values; `title` defaults to the status's reason phrase, `type` to `about:blank`.
    public init(status: Int, title: String? = nil, detail: String, type: String = "about:blank", extra: [String: JSONValue] = [:],
                headers: HTTPHeaders = HTTPHeaders()) {
        self.status = status
        self.title = title ?? HTTPStatus.reasonPhrase(status)
        self.detail = detail
        self.type = type
        self.extra = extra
        self.headers = headers
    }

    /// A 400 problem; `field` names the offending input, when there is one.
    public static func badRequest(_ detail: String, field: String? = nil) -> ProblemError {
        ProblemError(status: 400, detail: detail, extra: field.map { ["field": .string($0)] } ?? [:])
    }

    /// The answer to a failure the client cannot do anything about; the failure itself goes to the log.
    public static let internalError = ProblemError(status: 500, detail: "The server failed to handle the request.")

    /// A 503 problem telling the client, in `Retry-After`, how many seconds to wait before trying again.
    public static func unavailable(_ detail: String, retryAfterSeconds: Int) -> ProblemError {
        ProblemError(status: 503, detail: detail, headers: ["Retry-After": String(retryAfterSeconds)])
    }

    /// The problem document as JSON text, core members first, then extensions sorted by name.
    public var jsonText: String {
        var out = "{\"type\":"
        JSONValue.writeString(type, to: &out)
        out += ",\"title\":"
        JSONValue.writeString(title, to: &out)
        out += ",\"status\":\(status),\"detail\":"
        JSONValue.writeString(detail, to: &out)
        for key in extra.keys.sorted() where !["type", "title", "status", "detail"].contains(key) {
            out += ","
            JSONValue.writeString(key, to: &out)
            out += ":"
            extra[key]!.write(to: &out)
        }
        return out + "}"
    }

    /// The response carrying this problem.
    public var response: HTTPResponse {
        var headers = headers
        headers.set("Content-Type", "application/problem+json")
        return HTTPResponse(status: status, headers: headers, body: Array(jsonText.utf8))
    }
}

/// Reason phrases of HTTP status codes.
enum HTTPStatus {
    /// The standard reason phrase of `status` (http-parser's table), or a generic one by class.
    static func reasonPhrase(_ status: Int) -> String {
        phrases.indices.contains(status) ? phrases[status] : phrase(status)
    }

    /// Every three-digit status's phrase, made once: a response's status line should not cost a C call
    /// and a string conversion.
    private static let phrases: [String] = (0..<1000).map(phrase)

    private static func phrase(_ status: Int) -> String {
        if let known = UInt32(exactly: status), let phrase = http_status_str(http_status(rawValue: known)) {
            let text = String(cString: phrase)
            if text != "<unknown>" { return text }
        }
        switch status {
        case 100..<200: return "Informational"
        case 200..<300: return "Success"
        case 300..<400: return "Redirection"
        case 400..<500: return "Client Error"
        default: return "Server Error"
        }
    }
}
