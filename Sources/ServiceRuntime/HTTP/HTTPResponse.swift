import Timestamps
import Foundation

/// What a handler answers. The server adds the framing headers itself (`Content-Length`, `Date`,
/// `Connection`, `X-Request-Id`); values set here for those names are ignored. A handler that must not answer
/// at all throws `HTTPConnectionAbort`.
public struct HTTPResponse: Sendable, Equatable {
    /// The HTTP status code (200, 404…); the status line's reason phrase is derived from it.
    public var status: Int
    /// The handler's header fields; values under framing names (`Content-Length`, `Date`…) are dropped.
    public var headers: HTTPHeaders
    /// The body; not sent for a `HEAD` request or a 1xx, 204 or 304 status.
    public var body: [UInt8]

    /// A response with these values; by default an empty 200 with no header fields.
    public init(status: Int = 200, headers: HTTPHeaders = HTTPHeaders(), body: [UInt8] = []) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// `value` encoded as JSON (`application/json`, keys sorted, dates as RFC 3339 UTC).
    ///
    /// Encoding can fail only for values JSON cannot hold (a non-finite `Double`); that answers a 500
    /// problem and logs the error, as any other handler failure would.
    public static func json<T: Encodable>(_ value: T, status: Int = 200) -> HTTPResponse {
        do {
            return json(encoded: Array(try makeEncoder().encode(value)), status: status)
        } catch {
            Log.error("json_encoding_failed", ["type": String(describing: T.self), "error": String(describing: error)])
            return ProblemError(status: 500, detail: "The server failed to produce its answer.").response
        }
    }

    /// A body already encoded as JSON (`application/json`), such as one written by hand or kept from before.
    public static func json(encoded body: [UInt8], status: Int = 200) -> HTTPResponse {
        HTTPResponse(status: status, headers: headers(contentType: "application/json"), body: body)
    }

    /// A text body with the given content type.
    public static func text(_ text: String, contentType: String = "text/plain; charset=utf-8", status: Int = 200) -> HTTPResponse {
        HTTPResponse(status: status, headers: headers(contentType: contentType), body: Array(text.utf8))
    }

    /// `Content-Type`, with room for what middleware adds (`Cache-Control`) without growing the list.
    private static func headers(contentType: String) -> HTTPHeaders {
        var headers = HTTPHeaders(capacity: 4)
        headers.add("Content-Type", contentType)
        return headers
    }

    private static func makeEncoder() -> JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .rfc3339
        return encoder
    }
}
