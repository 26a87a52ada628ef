/// Turns a handler's response into HTTP/1.1 bytes with the server's framing headers.
enum HTTPResponseSerializer {
    /// Header names the server owns; a handler's values for them are dropped.
    private static let framingHeaders = ["Content-Length", "Transfer-Encoding", "Connection", "Keep-Alive", "Date", "X-Request-Id"]
    /// The lengths of `framingHeaders`' names, one bit each: most names are told apart by length alone.
    private static let framingLengths = framingHeaders.reduce(UInt64(0)) { $0 | 1 << $1.utf8.count }

    /// Appends the full response to `bytes`: status line, the handler's headers (sanitized), then
    /// `X-Request-Id`, `Content-Length` (not for 1xx, 204, 304), `Date` and `Connection` when needed. `HEAD`
    /// answers carry the length of the body they leave out.
    static func serialize(_ response: HTTPResponse, context: HTTPConnectionStateMachine.ResponseContext, date: String,
                          into bytes: inout [UInt8]) {
        let status = (100...999).contains(response.status) ? response.status : 500
        let bodyless = status < 200 || status == 204 || status == 304
        let sendsBody = !bodyless && context.method != "HEAD"
        bytes.reserveCapacity(bytes.count + 256 + (sendsBody ? response.body.count : 0))
        bytes.append(literal: "HTTP/1.1 ")
        bytes.append(decimal: status)
        bytes.append(0x20)
        bytes.append(utf8: HTTPStatus.reasonPhrase(status))
        bytes.append(literal: "\r\n")
        response.headers.forEachField { name, value in
            if HTTPToken.isToken(name.utf8) && !isFraming(name) { appendField(name, sanitize(value), to: &bytes) }
        }
        appendField("X-Request-Id", context.requestID, to: &bytes)
        if !bodyless {
            bytes.append(literal: "Content-Length: ")
            bytes.append(decimal: response.body.count)
            bytes.append(literal: "\r\n")
        }
        appendField("Date", date, to: &bytes)
        if !context.keepAlive {
            appendField("Connection", "close", to: &bytes)
        } else if context.version == .http1_0 {
            appendField("Connection", "keep-alive", to: &bytes)
        }
        bytes.append(literal: "\r\n")
        if sendsBody {
            bytes.append(contentsOf: response.body)
        }
    }

    /// The interim answer to `Expect: 100-continue`.
    static let continueResponse = Array("HTTP/1.1 100 Continue\r\n\r\n".utf8)

    private static func appendField(_ name: String, _ value: String, to bytes: inout [UInt8]) {
        bytes.append(utf8: name)
        bytes.append(literal: ": ")
        bytes.append(utf8: value)
        bytes.append(literal: "\r\n")
    }

    /// True when `name` is one of `framingHeaders`.
    private static func isFraming(_ name: String) -> Bool {
        let length = name.utf8.count
        return length < 64 && framingLengths & (1 << length) != 0 && framingHeaders.contains { HTTPHeaders.sameName($0, name) }
    }

    /// Replaces CR, LF and NUL so a value can never end the header line early.
    private static func sanitize(_ value: String) -> String {
        guard value.utf8.contains(where: { $0 == 0x0D || $0 == 0x0A || $0 == 0 }) else { return value }
        return String(value.map { $0 == "\r" || $0 == "\n" || $0 == "\0" || $0 == "\r\n" ? " " : $0 })
    }
}
