/// Turns a handler's response into HTTP/1.1 bytes with the server's framing headers.
enum HTTPResponseSerializer {
    /// Header names the server owns; a handler's values for them are dropped.
    private static let framingHeaders = ["Content-Length", "Transfer-Encoding", "Connection", "Keep-Alive", "Date", "X-Request-Id"]

    /// The full response: status line, the handler's headers (sanitized), then `X-Request-Id`,
    /// `Content-Length` (not for 1xx, 204, 304), `Date` and `Connection` when needed. `HEAD` answers carry
    /// the length of the body they leave out.
    static func serialize(_ response: HTTPResponse, context: HTTPConnectionStateMachine.ResponseContext, date: String) -> [UInt8] {
        let status = (100...999).contains(response.status) ? response.status : 500
        let bodyless = status < 200 || status == 204 || status == 304
        let sendsBody = !bodyless && context.method != "HEAD"
        var bytes: [UInt8] = []
        bytes.reserveCapacity(256 + (sendsBody ? response.body.count : 0))
        bytes.append(contentsOf: "HTTP/1.1 ".utf8)
        appendDecimal(status, to: &bytes)
        bytes.append(0x20)
        bytes.append(contentsOf: HTTPStatus.reasonPhrase(status).utf8)
        bytes.append(contentsOf: crlf)
        for (name, value) in response.headers where isToken(name) && !framingHeaders.contains(where: { HTTPHeaders.sameName($0, name) }) {
            appendField(name, sanitize(value), to: &bytes)
        }
        appendField("X-Request-Id", context.requestID, to: &bytes)
        if !bodyless {
            bytes.append(contentsOf: "Content-Length: ".utf8)
            appendDecimal(response.body.count, to: &bytes)
            bytes.append(contentsOf: crlf)
        }
        appendField("Date", date, to: &bytes)
        if !context.keepAlive {
            appendField("Connection", "close", to: &bytes)
        } else if context.version == .http1_0 {
            appendField("Connection", "keep-alive", to: &bytes)
        }
        bytes.append(contentsOf: crlf)
        if sendsBody {
            bytes.append(contentsOf: response.body)
        }
        return bytes
    }

    /// The interim answer to `Expect: 100-continue`.
    static let continueResponse = Array("HTTP/1.1 100 Continue\r\n\r\n".utf8)

    private static let crlf: [UInt8] = [0x0D, 0x0A]

    private static func appendField(_ name: String, _ value: String, to bytes: inout [UInt8]) {
        bytes.append(contentsOf: name.utf8)
        bytes.append(0x3A)
        bytes.append(0x20)
        bytes.append(contentsOf: value.utf8)
        bytes.append(contentsOf: crlf)
    }

    private static func appendDecimal(_ value: Int, to bytes: inout [UInt8]) {
        guard value >= 10 else {
            bytes.append(UInt8(truncatingIfNeeded: value) + 0x30)
            return
        }
        appendDecimal(value / 10, to: &bytes)
        bytes.append(UInt8(truncatingIfNeeded: value % 10) + 0x30)
    }

    private static func isToken(_ name: String) -> Bool {
        !name.isEmpty && name.utf8.allSatisfy { byte in
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"):
                true
            default:
                "!#$%&'*+-.^_`|~".utf8.contains(byte)
            }
        }
    }

    /// Replaces CR, LF and NUL so a value can never end the header line early.
    private static func sanitize(_ value: String) -> String {
        guard value.utf8.contains(where: { $0 == 0x0D || $0 == 0x0A || $0 == 0 }) else { return value }
        return String(value.map { $0 == "\r" || $0 == "\n" || $0 == "\0" || $0 == "\r\n" ? " " : $0 })
    }
}
