/// The request line and header block of one request, as the parser hands it to the connection's machine: the
/// request as handlers will see it (its fields in one shared box, so passing the head on costs one reference
/// count and a request without a body becomes the handler's request with no copy) and how it is framed.
struct HTTPRequestHead: Sendable, Equatable {
    /// The request so far: every field but the body.
    var request: HTTPRequest
    var version: HTTPVersion
    /// False when this must be the connection's last request (`Connection: close`, HTTP/1.0 without
    /// keep-alive, an upgrade attempt).
    var keepAlive: Bool
    /// The client sent `Expect: 100-continue` and waits for our go-ahead before sending the body.
    var expectsContinue: Bool
    /// The declared `Content-Length`, when there is one.
    var contentLength: Int?
}

/// The protocol version of a request.
struct HTTPVersion: Sendable, Equatable {
    var major: Int
    var minor: Int

    static let http1_0 = HTTPVersion(major: 1, minor: 0)
    static let http1_1 = HTTPVersion(major: 1, minor: 1)
}

/// Why a request could not be read; each ends the connection after its problem response.
enum HTTPParseFailure: Sendable, Equatable {
    /// The request line is longer than the header limit on its own.
    case uriTooLong
    /// The request line and headers together exceed the header byte limit.
    case headersTooLarge
    /// More header fields than allowed.
    case tooManyHeaders
    /// Both `Content-Length` and `Transfer-Encoding` were sent (a request smuggling vector).
    case conflictingFraming
    /// A `Transfer-Encoding` other than `chunked` alone: a coding the server does not implement.
    case unsupportedTransferCoding
    /// A major HTTP version other than 1.
    case unsupportedVersion
    /// Anything else http-parser or the head's own checks rejected; the text says what.
    case malformed(String)

    /// The problem answered to the client.
    var problem: ProblemError {
        switch self {
        case .uriTooLong:
            ProblemError(status: 414, detail: "The request target is too long.")
        case .headersTooLarge:
            ProblemError(status: 431, detail: "The request header block is too large.")
        case .tooManyHeaders:
            ProblemError(status: 431, detail: "The request has too many header fields.")
        case .conflictingFraming:
            ProblemError(status: 400, detail: "A request must not carry both Content-Length and Transfer-Encoding.")
        case .unsupportedTransferCoding:
            ProblemError(status: 501, detail: "The only Transfer-Encoding taken is chunked, given once.")
        case .unsupportedVersion:
            ProblemError(status: 505, detail: "Only HTTP/1.1 (and 1.0) is served.")
        case .malformed(let description):
            ProblemError(status: 400, detail: "The request is not valid HTTP/1.1: \(description).")
        }
    }
}
