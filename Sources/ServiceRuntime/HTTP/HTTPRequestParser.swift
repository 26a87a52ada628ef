import CUV
import Glibc

/// What the parser found in the bytes it was given, in order.
enum HTTPParserEvent: Sendable, Equatable {
    /// The first byte of a new request arrived.
    case messageBegin
    /// The request line and headers are complete.
    case head(HTTPRequestHead)
    /// A piece of the body (already de-chunked).
    case body([UInt8])
    /// The request is complete.
    case end
    /// The bytes are not an acceptable request; nothing more will be parsed.
    case failure(HTTPParseFailure, requestID: String, method: String?)
}

/// Header limits the parser enforces while reading a request head.
struct HTTPParserLimits: Sendable, Equatable {
    var maxHeaderBytes: Int
    var maxHeaders: Int
}

/// Request parsing with nodejs http-parser: bytes in, `HTTPParserEvent`s out.
///
/// The parser stops after each complete request, so the caller decides whether to go on (pipelined
/// requests wait in the caller's buffer while the connection applies back-pressure). The C callbacks find
/// this object through the `http_parser`'s `data` pointer (unretained: the object owns the parser memory).
final class HTTPRequestParser {
    private let parser: UnsafeMutablePointer<http_parser>
    private let limits: HTTPParserLimits
    private var events: [HTTPParserEvent] = []
    private var failed = false

    // The request being read.
    private var url: [UInt8] = []
    private var field: [UInt8] = []
    private var value: [UInt8] = []
    private var headers = HTTPHeaders()
    private var inValue = false
    private var headComplete = false
    private var headerBytes = 0
    private var method: String?
    private var requestID: String?
    private var failure: HTTPParseFailure?
    /// The end of the bytes being parsed, while `http_parser_execute` runs.
    private var bytesEnd: UnsafeRawPointer?
    /// How many bytes of the CRLF that must follow a chunk's data are still to be checked at the start of the
    /// next bytes (0–2): this build of http-parser is not strict and skips any two bytes there, which a proxy
    /// framing the body otherwise would read as the start of the next chunk (request smuggling).
    private var chunkEndDue = 0
    /// The line endings of the head being received, checked ahead of http-parser, which (this build not being strict)
    /// takes a bare LF for a line's end: a proxy that keeps `X: a\nContent-Length: 5` as one field would frame the
    /// request otherwise (request smuggling). Nil once the head's empty line has been seen.
    private var headLines: HeadLines? = HeadLines()

    /// Where the check of the head's line endings stands: the last byte seen, and whether the current line has any.
    private struct HeadLines {
        var previous: UInt8 = 0
        var lineHasBytes = false
        var sawLine = false
    }

    init(limits: HTTPParserLimits) {
        self.limits = limits
        parser = .allocate(capacity: 1)
        http_parser_init(parser, HTTP_REQUEST)
        parser.pointee.data = Unmanaged.passUnretained(self).toOpaque()
    }

    deinit {
        parser.deallocate()
    }

    /// Parses as much of `bytes` as belongs to the current request (stopping after its end) and returns how
    /// many bytes were used with what they held. After a `.failure` every later call consumes and reports nothing.
    func parse(_ bytes: UnsafeRawBufferPointer) -> (consumed: Int, events: [HTTPParserEvent]) {
        guard !failed, !bytes.isEmpty else { return (failed ? bytes.count : 0, []) }
        events.removeAll(keepingCapacity: true)
        if chunkEndDue > 0 {
            let checked = Self.checkChunkEnd(from: bytes.baseAddress!, available: bytes.count, due: chunkEndDue)
            guard let checked else {
                fail(Self.badChunkEnd)
                return (bytes.count, events)
            }
            chunkEndDue -= checked
        }
        if headLines != nil, !checkHeadLines(bytes) {
            fail(.malformed("a line of the head ends with LF alone; CRLF expected"))
            return (bytes.count, events)
        }
        bytesEnd = bytes.baseAddress! + bytes.count
        defer { bytesEnd = nil }
        let consumed = http_parser_execute(parser, Self.settings, bytes.baseAddress!.assumingMemoryBound(to: CChar.self), bytes.count)
        let code = http_errno(rawValue: parser.pointee.http_errno)
        if code == HPE_PAUSED {
            http_parser_pause(parser, 0)
        } else if code != HPE_OK || (parser.pointee.upgrade != 0 && !events.contains(.end)) {
            fail(failure ?? failure(for: code))
            return (bytes.count, events)
        }
        return (consumed, events)
    }

    /// Checks the head's line endings in `bytes` up to its empty line (then stops: the body may hold anything);
    /// false at an LF not preceded by CR. Empty lines before the request line are skipped, as http-parser does.
    /// It looks only at each LF and the byte before it (`memchr` finds them): every request's head passes here.
    private func checkHeadLines(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard var lines = headLines, let base = bytes.baseAddress else { return true }
        let cr = UInt8(ascii: "\r"), lf = UInt8(ascii: "\n")
        var start = 0
        while start < bytes.count, let found = memchr(base + start, Int32(lf), bytes.count - start) {
            let end = base.distance(to: UnsafeRawPointer(found))
            guard (end > 0 ? bytes[end - 1] : lines.previous) == cr else { return false }
            // The line's bytes before its CR: here from `start`, or in earlier bytes.
            let hasBytes = lines.lineHasBytes || end - 1 > start
            if !hasBytes && lines.sawLine {
                headLines = nil  // the empty line that ends the head
                return true
            }
            lines.sawLine = lines.sawLine || hasBytes
            lines.lineHasBytes = false
            start = end + 1
        }
        if start < bytes.count {
            // A line begun, to go on in the next bytes; a CR alone at the end may be its end's first half.
            lines.lineHasBytes = lines.lineHasBytes || bytes.count - start > 1 || bytes[start] != cr
        }
        lines.previous = bytes[bytes.count - 1]
        headLines = lines
        return true
    }

    private func fail(_ failure: HTTPParseFailure) {
        failed = true
        let id = requestID ?? RequestID.accept(inValue ? nil : headers["X-Request-Id"])
        events.append(.failure(failure, requestID: id, method: method))
    }

    private func failure(for code: http_errno) -> HTTPParseFailure {
        switch code {
        case HPE_HEADER_OVERFLOW: return .headersTooLarge
        case HPE_UNEXPECTED_CONTENT_LENGTH:
            // The last field may still be pending (http-parser checks the framing before the head's end is reported).
            let pendingTransferEncoding = inValue && String(decoding: field, as: UTF8.self).lowercased() == "transfer-encoding"
            return headers.contains("Transfer-Encoding") || pendingTransferEncoding ? .conflictingFraming : .malformed("Content-Length given twice")
        case HPE_INVALID_TRANSFER_ENCODING: return .unsupportedTransferCoding
        default: return .malformed(String(cString: http_errno_description(code)))
        }
    }

    // MARK: - Callbacks

    private func messageBegin() -> Int32 {
        url.removeAll(keepingCapacity: true)
        field.removeAll(keepingCapacity: true)
        value.removeAll(keepingCapacity: true)
        headers = HTTPHeaders(capacity: 8)
        inValue = false
        headComplete = false
        headerBytes = 0
        method = nil
        requestID = nil
        events.append(.messageBegin)
        return 0
    }

    private func appendURL(_ bytes: UnsafeRawBufferPointer) -> Int32 {
        if method == nil {
            method = Self.methodName(parser.pointee.method)
        }
        if url.count + bytes.count > limits.maxHeaderBytes {
            failure = .uriTooLong
            return 1
        }
        guard countHeaderBytes(bytes.count, startsItem: url.isEmpty) else { return 1 }
        url.append(contentsOf: bytes)
        return 0
    }

    private func appendField(_ bytes: UnsafeRawBufferPointer) -> Int32 {
        if inValue {
            guard commitField() else { return 1 }
        }
        guard countHeaderBytes(bytes.count, startsItem: field.isEmpty) else { return 1 }
        if headComplete {
            if field.isEmpty { field.append(0) }  // trailer fields of a chunked body are counted, then dropped
            return 0
        }
        if field.isEmpty && headers.count >= limits.maxHeaders {
            failure = .tooManyHeaders
            return 1
        }
        field.append(contentsOf: bytes)
        return 0
    }

    private func appendValue(_ bytes: UnsafeRawBufferPointer) -> Int32 {
        guard countHeaderBytes(bytes.count, startsItem: false) else { return 1 }
        inValue = true
        if !headComplete { value.append(contentsOf: bytes) }
        return 0
    }

    /// Adds a piece of the request line or a header to the head's size, counting four bytes of separator
    /// and line end per line; false past the limit.
    private func countHeaderBytes(_ count: Int, startsItem: Bool) -> Bool {
        headerBytes += count + (startsItem ? 4 : 0)
        if headerBytes > limits.maxHeaderBytes {
            failure = failure ?? .headersTooLarge
            return false
        }
        return true
    }

    /// Adds the field read to the head; false (with the failure set) when its name is not a token (a space
    /// before the colon, say: RFC 9112 wants a 400, lest a proxy and this server frame the request differently).
    private func commitField() -> Bool {
        guard !headComplete else {
            field.removeAll(keepingCapacity: true)
            value.removeAll(keepingCapacity: true)
            inValue = false
            return true
        }
        guard HTTPToken.isToken(field) else {
            failure = .malformed("invalid character in a header field name")
            return false
        }
        var end = value.count
        while end > 0, value[end - 1] == 0x20 || value[end - 1] == 0x09 { end -= 1 }
        let trimmed = value.withUnsafeBufferPointer { String(decoding: UnsafeBufferPointer(rebasing: $0[..<end]), as: UTF8.self) }
        headers.add(String(decoding: field, as: UTF8.self), trimmed)
        field.removeAll(keepingCapacity: true)
        value.removeAll(keepingCapacity: true)
        inValue = false
        return true
    }

    private func headersComplete() -> Int32 {
        if inValue || !field.isEmpty {
            guard commitField() else { return -1 }
        }
        headComplete = true
        requestID = RequestID.accept(headers["X-Request-Id"])
        if headers.contains("Content-Length") && headers.contains("Transfer-Encoding") {
            failure = .conflictingFraming
            return -1
        }
        if parser.pointee.http_major != 1 {
            failure = .unsupportedVersion
            return -1
        }
        // http-parser takes any codings ending in chunked ("gzip, chunked") and chunked twice; only chunked, once, is decoded.
        if headers["Transfer-Encoding"] != nil {
            let codings = headers.values(for: "Transfer-Encoding")
            guard codings.count == 1, codings[0].lowercased() == "chunked" else {
                failure = .unsupportedTransferCoding
                return -1
            }
        }
        guard let target = splitTarget() else {
            failure = .malformed("invalid request target")
            return -1
        }
        let query = PercentDecoding.decodeQuery(target.query)
        // An Upgrade offer (h2c, websocket) is declined by answering in HTTP/1.1 (RFC 9110 §7.8), on a connection that
        // stays open: without this http-parser would stop reading the connection after this request.
        if parser.pointee.method != HTTP_CONNECT.rawValue { parser.pointee.upgrade = 0 }
        let version = HTTPVersion(major: Int(parser.pointee.http_major), minor: Int(parser.pointee.http_minor))
        let flags = parser.pointee.flags
        let request = HTTPRequest(
            method: method ?? "GET", path: target.path, query: query.values, rawQuery: target.query, queryProblem: query.problem,
            headers: headers, requestID: requestID!)
        let head = HTTPRequestHead(
            request: request,
            version: version,
            // RFC 9112 §6.1: an HTTP/1.0 message with Transfer-Encoding has faulty framing; close after it.
            keepAlive: http_should_keep_alive(parser) != 0 && parser.pointee.upgrade == 0
                && !(version == .http1_0 && headers["Transfer-Encoding"] != nil),
            expectsContinue: version == .http1_1 && headers["Expect"]?.lowercased() == "100-continue",
            contentLength: flags & UInt32(F_CONTENTLENGTH.rawValue) != 0 ? Int(clamping: parser.pointee.content_length) : nil)
        events.append(.head(head))
        return 0
    }

    /// The path and raw query of the request target (origin form, or absolute form from a proxy); nil when
    /// http-parser cannot split it or it is not UTF-8 (http-parser lets bytes above 0x7F through).
    private func splitTarget() -> (path: String, query: String)? {
        if url.count == 1 && url[0] == UInt8(ascii: "*") { return ("*", "") }
        var parts = http_parser_url()
        http_parser_url_init(&parts)
        let isConnect: Int32 = parser.pointee.method == HTTP_CONNECT.rawValue ? 1 : 0
        let status = url.withUnsafeBufferPointer { buffer in
            buffer.withMemoryRebound(to: CChar.self) { http_parser_parse_url($0.baseAddress, $0.count, isConnect, &parts) }
        }
        guard status == 0 else { return nil }
        func field(_ which: http_parser_url_fields) -> String? {
            guard parts.field_set & (1 << UInt16(which.rawValue)) != 0 else { return "" }
            // `field_data` is an array of anonymous structs Swift does not import: read its (offset, length)
            // pairs of UInt16 from the struct's bytes, which follow `field_set` and `port`.
            let range = withUnsafeBytes(of: parts) { raw -> Range<Int> in
                let base = 4 + 4 * Int(which.rawValue)
                let offset = Int(raw.loadUnaligned(fromByteOffset: base, as: UInt16.self))
                let length = Int(raw.loadUnaligned(fromByteOffset: base + 2, as: UInt16.self))
                return offset..<offset + length
            }
            return url.withUnsafeBufferPointer { buffer in
                let bytes = UnsafeBufferPointer(rebasing: buffer[range])
                // ASCII, as targets nearly always are, is valid as it stands: decoding it skips the generic
                // validator, which looks its type metadata up on every call.
                return bytes.allSatisfy { $0 < 0x80 } ? String(decoding: bytes, as: UTF8.self) : String(validating: bytes, as: UTF8.self)
            }
        }
        guard let path = field(UF_PATH), let query = field(UF_QUERY) else { return nil }
        return (path.isEmpty ? "/" : path, query)
    }

    private func body(_ bytes: UnsafeRawBufferPointer) -> Int32 {
        events.append(.body(Array(bytes)))
        // The last piece of a chunk's data: the CRLF after it is checked here as far as these bytes reach.
        if parser.pointee.flags & UInt32(F_CHUNKED.rawValue) != 0 && parser.pointee.content_length == 0, let end = bytes.baseAddress.map({ $0 + bytes.count }),
           let bytesEnd {
            guard let checked = Self.checkChunkEnd(from: end, available: bytesEnd - end, due: 2) else {
                failure = Self.badChunkEnd
                return -1
            }
            chunkEndDue = 2 - checked
        }
        return 0
    }

    private static let badChunkEnd = HTTPParseFailure.malformed("chunk data not followed by CRLF")

    /// Checks the last `due` bytes of CRLF against the first of the `available` bytes at `start`; answers how many
    /// were checked, nil when one is wrong.
    private static func checkChunkEnd(from start: UnsafeRawPointer, available: Int, due: Int) -> Int? {
        let expected: [UInt8] = [0x0D, 0x0A]
        let count = min(due, available)
        for index in 0..<count where start.load(fromByteOffset: index, as: UInt8.self) != expected[2 - due + index] {
            return nil
        }
        return count
    }

    private func messageComplete() -> Int32 {
        events.append(.end)
        headLines = HeadLines()  // the next request's head
        http_parser_pause(parser, 1)
        return 0
    }

    /// http-parser's method names by code (an 8-bit field), made into strings once.
    private static let methodNames: [String] = (0..<256).map { String(cString: http_method_str(http_method(rawValue: $0))) }

    private static func methodName(_ code: UInt32) -> String {
        methodNames[Int(code & 0xFF)]
    }

    // MARK: - C glue

    private static func instance(_ parser: UnsafeMutablePointer<http_parser>?) -> HTTPRequestParser {
        Unmanaged<HTTPRequestParser>.fromOpaque(parser!.pointee.data).takeUnretainedValue()
    }

    private static func buffer(_ at: UnsafePointer<CChar>?, _ length: Int) -> UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(start: at, count: length)
    }

    /// The callbacks, shared by every parser: written once, then only read.
    nonisolated(unsafe) private static let settings: UnsafePointer<http_parser_settings> = {
        let settings = UnsafeMutablePointer<http_parser_settings>.allocate(capacity: 1)
        http_parser_settings_init(settings)
        settings.pointee.on_message_begin = { instance($0).messageBegin() }
        settings.pointee.on_url = { instance($0).appendURL(buffer($1, $2)) }
        settings.pointee.on_header_field = { instance($0).appendField(buffer($1, $2)) }
        settings.pointee.on_header_value = { instance($0).appendValue(buffer($1, $2)) }
        settings.pointee.on_headers_complete = { instance($0).headersComplete() }
        settings.pointee.on_body = { instance($0).body(buffer($1, $2)) }
        settings.pointee.on_message_complete = { instance($0).messageComplete() }
        return UnsafePointer(settings)
    }()
}
