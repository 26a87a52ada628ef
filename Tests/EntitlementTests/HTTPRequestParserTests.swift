import Testing
@testable import AppStore
@testable import EntitlementService
@testable import FakeAppStore
@testable import ServiceRuntime

/// Request parsing with http-parser: events, pausing between requests, limits.
@Suite struct HTTPRequestParserTests {
    private func parser(maxHeaderBytes: Int = 16 << 10, maxHeaders: Int = 100) -> HTTPRequestParser {
        HTTPRequestParser(limits: .init(maxHeaderBytes: maxHeaderBytes, maxHeaders: maxHeaders))
    }

    private func heads(_ events: [HTTPParserEvent]) -> [HTTPRequestHead] {
        events.compactMap { if case .head(let head) = $0 { head } else { nil } }
    }

    private func failure(_ events: [HTTPParserEvent]) -> HTTPParseFailure? {
        events.lazy.compactMap { if case .failure(let failure, _, _) = $0 { failure } else { nil } }.first
    }

    /// A target's raw bytes above ASCII are taken when they are UTF-8 and refuse the request when they are not
    /// (http-parser lets them through).
    @Test func targetBytesMustBeUTF8() throws {
        let valid = Array("GET /caf\u{E9}?q=\u{1F600} HTTP/1.1\r\nHost: a\r\n\r\n".utf8)
        let head = try #require(heads(parser().parse(valid).events).first)
        #expect(head.request.path == "/caf\u{E9}")
        #expect(head.request.rawQuery == "q=\u{1F600}")
        for invalid: [UInt8] in [[0xFF], [0xC3], [0xE9, 0x41]] {
            let bytes = Array("GET /a".utf8) + invalid + Array(" HTTP/1.1\r\nHost: a\r\n\r\n".utf8)
            #expect(failure(parser().parse(bytes).events) == .malformed("invalid request target"), "\(invalid)")
            let query = Array("GET /a?b=".utf8) + invalid + Array(" HTTP/1.1\r\nHost: a\r\n\r\n".utf8)
            #expect(failure(parser().parse(query).events) == .malformed("invalid request target"), "\(invalid)")
        }
    }

    @Test func simpleRequest() throws {
        let bytes = Array("GET /v1/users/u%201/entitlements?at=2026-11-22T01%3A20%3A00Z&x HTTP/1.1\r\nHost: a\r\nX-Request-Id: req-7\r\nX-Pad:  spaced  \r\n\r\n".utf8)
        let (consumed, events) = parser().parse(bytes)
        #expect(consumed == bytes.count)
        #expect(events.count == 3)
        #expect(events.first == .messageBegin && events.last == .end)
        let head = try #require(heads(events).first)
        #expect(head.request.method == "GET")
        #expect(head.request.path == "/v1/users/u%201/entitlements")
        #expect(head.request.rawQuery == "at=2026-11-22T01%3A20%3A00Z&x")
        #expect(head.request.query == ["at": "2026-11-22T01:20:00Z", "x": ""])
        #expect(head.request.headers["host"] == "a")
        #expect(head.request.headers["X-Pad"] == "spaced")
        #expect(head.request.requestID == "req-7")
        #expect(head.version == .http1_1)
        #expect(head.keepAlive)
        #expect(!head.expectsContinue)
        #expect(head.contentLength == nil)
    }

    @Test func stopsAfterEachRequest() {
        let first = "POST /a HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc"
        let second = "GET /b HTTP/1.1\r\n\r\n"
        let bytes = Array((first + second).utf8)
        let parser = parser()
        let (consumed, events) = parser.parse(bytes)
        #expect(consumed == first.utf8.count)
        #expect(events.contains(.body(Array("abc".utf8))))
        #expect(heads(events).map(\.request.path) == ["/a"])
        let (rest, later) = parser.parse(Array(bytes[consumed...]))
        #expect(rest == second.utf8.count)
        #expect(heads(later).map(\.request.path) == ["/b"])
    }

    @Test func byteByByteGivesTheSameRequest() throws {
        let text = "POST /echo?q=1 HTTP/1.1\r\nHost: example\r\nContent-Length: 5\r\nX-Long-Header-Name: some value\r\n\r\nhello"
        let parser = parser()
        var events: [HTTPParserEvent] = []
        for byte in Array(text.utf8) {
            let result = parser.parse([byte])
            #expect(result.consumed == 1)
            events += result.events
        }
        let head = try #require(heads(events).first)
        #expect(head.request.headers["X-Long-Header-Name"] == "some value")
        #expect(head.request.headers["host"] == "example")
        #expect(head.contentLength == 5)
        let body = events.flatMap { event -> [UInt8] in if case .body(let bytes) = event { bytes } else { [] } }
        #expect(body == Array("hello".utf8))
        #expect(events.last == .end)
    }

    /// A line of the head must end with CRLF (http-parser's lax build takes a bare LF): `X: a\nContent-Length: 5`
    /// would be one field to a strict proxy and two here. The body may hold any bytes, and the check holds however
    /// the bytes arrive, for every request of a pipeline.
    @Test(arguments: ["GET /a HTTP/1.1\r\nHost: x\r\nX: a\nContent-Length: 5\r\n\r\nhello", "GET /a HTTP/1.1\nHost: x\n\n",
                      "GET /a HTTP/1.1\r\nHost: x\r\n\n", "GET /a HTTP/1.1\r\nHost: x\r\n\r\nGET /b HTTP/1.1\r\nX: a\nY: b\r\n\r\n"])
    func aHeadLineEndingInLFAloneIsRefused(text: String) {
        for pieces in [[Array(text.utf8)], Array(text.utf8).map { [$0] }] {
            let parser = parser()
            var events: [HTTPParserEvent] = []
            for piece in pieces {
                var rest = piece[...]
                while !rest.isEmpty {
                    let result = parser.parse(Array(rest))
                    events += result.events
                    guard result.consumed > 0 else { break }
                    rest = rest.dropFirst(result.consumed)
                }
            }
            #expect(failure(events) == .malformed("a line of the head ends with LF alone; CRLF expected"), "\(pieces.count) pieces")
        }
    }

    @Test func aBodyMayHoldLFAndEmptyLinesMayComeBeforeTheRequest() throws {
        let text = "\r\nPOST /a HTTP/1.1\r\nContent-Length: 4\r\n\r\na\nb\nGET /b HTTP/1.1\r\nHost: x\r\n\r\n"
        let parser = parser()
        let bytes = Array(text.utf8)
        let (consumed, events) = parser.parse(bytes)
        #expect(failure(events) == nil && heads(events).map(\.request.path) == ["/a"])
        let (_, later) = parser.parse(Array(bytes[consumed...]))
        #expect(failure(later) == nil && heads(later).map(\.request.path) == ["/b"])
    }

    @Test func chunkedBodyIsDechunkedAndTrailersDropped() throws {
        let text = "POST /c HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\nX-Trailer: t\r\n\r\n"
        let (_, events) = parser().parse(Array(text.utf8))
        let body = events.flatMap { event -> [UInt8] in if case .body(let bytes) = event { bytes } else { [] } }
        #expect(body == Array("abcde".utf8))
        #expect(try #require(heads(events).first).request.headers["X-Trailer"] == nil)
        #expect(events.last == .end)
    }

    /// The CRLF after a chunk's data is checked, whether it arrives with the data, alone, split, or byte by byte:
    /// anything else there is a 400, never skipped (a proxy would read those bytes as the next chunk's size).
    @Test func chunkDataMustEndWithCRLFHoweverTheBytesArrive() throws {
        let good = Array("POST /c HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n".utf8)
        for bad in ["3\r\nabcXX0\r\n\r\n", "3\r\nabc\rX0\r\n\r\n", "3\r\nabcZZ5\r\nhello\r\n0\r\n\r\n", "3\r\nabc\n\r0\r\n\r\n"] {
            let text = Array(("POST /c HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n" + bad).utf8)
            for split in 1..<text.count {
                let parser = parser()
                let first = parser.parse(Array(text[..<split]))
                let second = first.consumed == split ? parser.parse(Array(text[split...])).events : []
                #expect(failure(first.events + second) == .malformed("chunk data not followed by CRLF"), "\(bad) split at \(split)")
            }
        }
        for split in 0..<good.count {
            let parser = parser()
            var events = split == 0 ? [] : parser.parse(Array(good[..<split])).events
            events += parser.parse(Array(good[split...])).events
            #expect(failure(events) == nil && events.last == .end, "split at \(split)")
        }
        let parser = parser()
        let bytewise = good.flatMap { parser.parse([$0]).events }
        #expect(failure(bytewise) == nil && bytewise.last == .end)
    }

    @Test func keepAliveFollowsTheProtocolRules() throws {
        func keepAlive(_ text: String) throws -> Bool {
            try #require(heads(parser().parse(Array(text.utf8)).events).first).keepAlive
        }
        #expect(try keepAlive("GET / HTTP/1.1\r\n\r\n"))
        #expect(try !keepAlive("GET / HTTP/1.1\r\nConnection: close\r\n\r\n"))
        #expect(try !keepAlive("GET / HTTP/1.0\r\n\r\n"))
        #expect(try keepAlive("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"))
        // An Upgrade offer is declined by answering in HTTP/1.1, on a connection that goes on.
        #expect(try keepAlive("GET / HTTP/1.1\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n"))
        // RFC 9112 §6.1: Transfer-Encoding in HTTP/1.0 is faulty framing; the connection closes after the request.
        #expect(try !keepAlive("POST / HTTP/1.0\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"))
    }

    @Test func expectContinueAndAbsoluteTargets() throws {
        let expect = try #require(heads(parser().parse(Array("PUT /p HTTP/1.1\r\nExpect: 100-Continue\r\nContent-Length: 1\r\n\r\n".utf8)).events).first)
        #expect(expect.expectsContinue)
        let absolute = try #require(heads(parser().parse(Array("GET http://example.com/x/y?z=1 HTTP/1.1\r\n\r\n".utf8)).events).first)
        #expect(absolute.request.path == "/x/y")
        #expect(absolute.request.rawQuery == "z=1")
    }

    @Test func headerBytesAreCountedOnceHoweverTheyArrive() throws {
        // 150 bytes of head against a 200-byte limit, fed one byte at a time.
        let text = "GET / HTTP/1.1\r\nX-Field: \(String(repeating: "v", count: 100))\r\nX-Other: w\r\n\r\n"
        let parser = parser(maxHeaderBytes: 200)
        var events: [HTTPParserEvent] = []
        for byte in Array(text.utf8) { events += parser.parse([byte]).events }
        #expect(failure(events) == nil)
        #expect(try #require(heads(events).first).request.headers["X-Other"] == "w")
    }

    @Test func connectIsTheLastRequest() throws {
        let (_, events) = parser().parse(Array("CONNECT example.com:443 HTTP/1.1\r\nHost: example.com\r\n\r\n".utf8))
        let head = try #require(heads(events).first)
        #expect(head.request.method == "CONNECT")
        #expect(!head.keepAlive)
        #expect(events.last == .end)
    }

    @Test func tooManyHeaders() {
        var text = "GET / HTTP/1.1\r\n"
        for index in 0..<11 { text += "X-\(index): v\r\n" }
        #expect(failure(parser(maxHeaders: 10).parse(Array((text + "\r\n").utf8)).events) == .tooManyHeaders)
    }

    @Test func headerBlockTooLarge() {
        let text = "GET / HTTP/1.1\r\nX-Big: \(String(repeating: "v", count: 200))\r\n\r\n"
        #expect(failure(parser(maxHeaderBytes: 100).parse(Array(text.utf8)).events) == .headersTooLarge)
    }

    @Test func requestLineTooLong() {
        let text = "GET /\(String(repeating: "p", count: 200)) HTTP/1.1\r\n\r\n"
        #expect(failure(parser(maxHeaderBytes: 100).parse(Array(text.utf8)).events) == .uriTooLong)
    }

    @Test func contentLengthWithTransferEncoding() {
        let text = "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n"
        #expect(failure(parser().parse(Array(text.utf8)).events) == .conflictingFraming)
    }

    /// What would let a proxy in front and this server frame a request differently is refused: a space before a
    /// field's colon (RFC 9112 §5.1), codings other than chunked alone (501), Content-Length twice; and HTTP/2 on
    /// an HTTP/1 connection (505).
    @Test(arguments: [
        ("POST / HTTP/1.1\r\nContent-Length : 3\r\n\r\nabc", HTTPParseFailure.malformed("invalid character in a header field name")),
        ("POST / HTTP/1.1\r\nTransfer-Encoding : chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n", .malformed("invalid character in a header field name")),
        ("GET / HTTP/1.1\r\nX Y: z\r\n\r\n", .malformed("invalid character in a header field name")),
        ("POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n", .unsupportedTransferCoding),
        ("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", .unsupportedTransferCoding),
        ("POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n", .unsupportedTransferCoding),
        ("POST / HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd", .malformed("Content-Length given twice")),
        ("POST / HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", .conflictingFraming),
        ("GET / HTTP/2.0\r\n\r\n", .unsupportedVersion),
    ])
    func framingAProxyCouldReadOtherwiseIsRefused(text: String, expected: HTTPParseFailure) {
        #expect(failure(parser().parse(Array(text.utf8)).events) == expected, "\(text)")
    }

    @Test func chunkedInAnyCaseIsTaken() {
        let text = "POST / HTTP/1.1\r\nTransfer-Encoding: Chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"
        #expect(failure(parser().parse(Array(text.utf8)).events) == nil)
    }

    /// A malformed escape in the query is no fault of the HTTP message: the request carries it, for the route that
    /// reads its query to refuse naming it.
    @Test func malformedPercentEncodingInTheQuery() throws {
        let text = "GET /?a=%G1&b=2 HTTP/1.1\r\n\r\n"
        let head = try #require(heads(parser().parse(Array(text.utf8)).events).first)
        #expect(head.request.queryProblem == .malformed(name: "a") && head.request.query == ["b": "2"])
    }

    @Test func junkFailsAndNothingIsParsedAfterwards() {
        let parser = parser()
        let junk = Array("\u{0}\u{1} nonsense\r\n\r\n".utf8)
        let (consumed, events) = parser.parse(junk)
        #expect(consumed == junk.count)
        guard case .failure(.malformed, let requestID, let method) = events.last else {
            Issue.record("expected a failure, got \(events)")
            return
        }
        #expect(RequestID.isSane(requestID))
        #expect(method == nil)
        #expect(parser.parse(Array("GET / HTTP/1.1\r\n\r\n".utf8)).events == [])
    }

    @Test func failureKeepsTheMethodAndSaneRequestID() {
        var text = "DELETE /x HTTP/1.1\r\nX-Request-Id: abc\r\n"
        for index in 0..<5 { text += "X-\(index): v\r\n" }
        guard case .failure(.tooManyHeaders, let requestID, let method) = parser(maxHeaders: 3).parse(Array(text.utf8)).events.last else {
            Issue.record("expected a failure")
            return
        }
        #expect(method == "DELETE")
        #expect(requestID == "abc")
    }
}

extension HTTPRequestParser {
    /// Parses bytes held in an array.
    func parse(_ bytes: [UInt8]) -> (consumed: Int, events: [HTTPParserEvent]) {
        bytes.withUnsafeBytes { parse($0) }
    }
}
