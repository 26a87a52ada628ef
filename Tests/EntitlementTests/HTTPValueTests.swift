import Foundation
import Testing
@testable import AppStore
@testable import EntitlementService
@testable import FakeAppStore
@testable import ServiceRuntime

/// Headers, percent-decoding, JSON bodies, problem documents and response framing.
@Suite struct HTTPValueTests {
    @Test func headersAreOrderedAndCaseInsensitive() {
        var headers: HTTPHeaders = ["Content-Type": "a"]
        headers.add("set-cookie", "1")
        headers.add("Set-Cookie", "2")
        #expect(headers["content-type"] == "a")
        #expect(headers.values(for: "SET-COOKIE") == ["1", "2"])
        headers.set("SET-cookie", "3")
        #expect(headers.values(for: "set-cookie") == ["3"])
        headers.remove("CONTENT-TYPE")
        #expect(!headers.contains("content-type"))
        #expect(headers.map(\.name) == ["SET-cookie"])
    }

    @Test func percentDecoding() {
        #expect(PercentDecoding.decode("a%20b+c") == "a b+c")
        #expect(PercentDecoding.decode("%E2%9C%93") == "✓")
        #expect(PercentDecoding.decode("%") == nil)
        #expect(PercentDecoding.decode("%4") == nil)
        #expect(PercentDecoding.decode("%FF") == nil)
        #expect(PercentDecoding.decodeQuery("a=1&b=x%26y&a=2&&c").values == ["a": "2", "b": "x&y", "c": ""])
        let malformed = PercentDecoding.decodeQuery("a=%zz&b=1")
        #expect(malformed.values == ["b": "1"] && malformed.problem == .malformed(name: "a"))
        #expect(PercentDecoding.decodeQuery("%zz=a").problem == .malformed(name: "%zz"))
        #expect(PercentDecoding.decodeQuery("a=1&a=2&b=%FF").problem == .repeated(name: "a"), "the first problem")
        #expect(PercentDecoding.decodeQuery("").values == [:])
        #expect(PercentDecoding.decodeQuery("&&").values == [:])
        #expect(PercentDecoding.decodeQuery("=v&a==b&&x&").values == ["": "v", "a": "=b", "x": ""])
        #expect(PercentDecoding.decodeQuery("é=ü%C3%A9&at=2026-11-24T09:00:00+01:00").values == ["é": "üé", "at": "2026-11-24T09:00:00+01:00"])
        #expect(PercentDecoding.decodeQuery("e\u{301}=1&👍🏽=2").values == ["e\u{301}": "1", "👍🏽": "2"])
        #expect(PercentDecoding.decodeQuery("").problem == nil)
        #expect(PercentDecoding.decodeQuery("at=2026-11-24T09:00:00Z").problem == nil)
        #expect(PercentDecoding.decodeQuery("a=1&&b=2&c").problem == nil)
        #expect(PercentDecoding.decodeQuery("a=1&b=2&b=3&a=4").problem == .repeated(name: "b"))
        #expect(PercentDecoding.decodeQuery("%61=1&a").problem == .repeated(name: "a"))
    }

    private struct Grant: Decodable {
        struct Item: Decodable { var product_id: String }
        var entitlement: String
        var expires_at: Date?
        var items: [Item]
    }

    private func decode(_ text: String) throws -> Grant {
        try HTTPRequest(method: "POST", path: "/", body: Array(text.utf8), requestID: "r").decodeJSON()
    }

    private func problem(_ text: String) -> ProblemError? {
        do {
            _ = try decode(text)
            return nil
        } catch {
            return error as? ProblemError
        }
    }

    @Test func decodeJSONAcceptsRFC3339Dates() throws {
        let grant = try decode(#"{"entitlement":"premium","expires_at":"2026-11-22T01:20:00Z","items":[]}"#)
        #expect(grant.expires_at == Date(timeIntervalSince1970: 1_795_310_400))
        let fractional = try decode(#"{"entitlement":"premium","expires_at":"2026-11-22T01:20:00.500Z","items":[]}"#)
        #expect(fractional.expires_at == Date(timeIntervalSince1970: 1_795_310_400.5))
    }

    @Test func queryDatesAreRFC3339AndNothingElse() throws {
        func at(_ value: String) throws -> Date? {
            try InputRules.queryDate(HTTPRequest(method: "GET", path: "/", query: ["at": value], requestID: "t"), "at")
        }
        let instant = Date(timeIntervalSince1970: 1_795_310_400)
        #expect(try at("2026-11-22T01:20:00Z") == instant)
        #expect(try at("2026-11-22t01:20:00z") == instant)
        #expect(try at("2026-11-22T02:20:00+01:00") == instant)
        #expect(try at("2026-11-22T01:20:00.500Z") == instant.addingTimeInterval(0.5))
        for bad in ["2026-11-22T02:20:00+0100", "2026-13-01T00:00:00Z", "2026-11-22", "yesterday"] {
            #expect(throws: ProblemError.self, "\(bad)") { try at(bad) }
        }
        #expect(try InputRules.queryDate(HTTPRequest(method: "GET", path: "/", requestID: "t"), "at") == nil)
    }

    @Test func decodeJSONNamesTheField() {
        let missing = problem(#"{"items":[]}"#)
        #expect(missing?.status == 400)
        #expect(missing?.extra["field"] == "entitlement")
        #expect(missing?.detail == "The field 'entitlement' is missing.")
        let nested = problem(#"{"entitlement":"p","items":[{"product_id":5}]}"#)
        #expect(nested?.extra["field"] == "items[0].product_id")
        #expect(nested?.detail == "The field 'items[0].product_id' must be a string.")
        let null = problem(#"{"entitlement":null,"items":[]}"#)
        #expect(null?.extra["field"] == "entitlement")
        let badDate = problem(#"{"entitlement":"p","expires_at":"tomorrow","items":[]}"#)
        #expect(badDate?.extra["field"] == "expires_at")
    }

    @Test func decodeJSONRejectsEmptyMalformedAndNonUTF8Bodies() {
        #expect(problem("")?.detail == "The request body is empty; a JSON document is expected.")
        #expect(problem("{nope")?.detail == "The request body is not valid JSON.")
        #expect(problem("[1]")?.detail == "The request body must be a JSON object.")
        let latin1 = HTTPRequest(method: "POST", path: "/", body: [0x7B, 0x22, 0xE9, 0x22, 0x7D], requestID: "r")
        #expect(throws: ProblemError.badRequest("The request body is not valid UTF-8.")) { try latin1.decodeJSON(Grant.self) }
    }

    @Test func problemDocumentOrderAndEscaping() {
        let problem = ProblemError(status: 422, detail: "quote \" and \n newline", extra: ["apple_status": 21010, "b": ["x": true], "status": 1])
        #expect(problem.title == "Unprocessable Entity")
        #expect(problem.jsonText == #"{"type":"about:blank","title":"Unprocessable Entity","status":422,"detail":"quote \" and \n newline","apple_status":21010,"b":{"x":true}}"#)
        #expect(problem.response.headers["Content-Type"] == "application/problem+json")
        #expect(problem.response.status == 422)
    }

    @Test func jsonResponsesAreSortedWithRFC3339Dates() {
        struct Body: Encodable { var z = 1; var a = "x/y"; var at = Date(timeIntervalSince1970: 1_795_310_400) }
        let response = HTTPResponse.json(Body(), status: 201)
        #expect(response.status == 201)
        #expect(String(decoding: response.body, as: UTF8.self) == #"{"a":"x/y","at":"2026-11-22T01:20:00Z","z":1}"#)
        #expect(HTTPResponse.json(["v": Double.nan]).status == 500)
    }

    private typealias Context = HTTPConnectionStateMachine.ResponseContext

    private func serialize(_ response: HTTPResponse, method: String = "GET", keepAlive: Bool = true, version: HTTPVersion = .http1_1) -> String {
        let context = Context(requestID: "rid", method: method, version: version, keepAlive: keepAlive)
        var bytes: [UInt8] = []
        HTTPResponseSerializer.serialize(response, context: context, date: "DATE", into: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }

    @Test func serializerWritesFramingHeaders() {
        var response = HTTPResponse.text("hi")
        response.headers.add("Content-Length", "999")
        response.headers.add("X-Request-Id", "forged")
        #expect(serialize(response) == "HTTP/1.1 200 OK\r\nContent-Type: text/plain; charset=utf-8\r\nX-Request-Id: rid\r\nContent-Length: 2\r\nDate: DATE\r\n\r\nhi")
        #expect(serialize(response, keepAlive: false).contains("\r\nConnection: close\r\n"))
        #expect(serialize(response, version: .http1_0).contains("\r\nConnection: keep-alive\r\n"))
        #expect(serialize(response, method: "HEAD").hasSuffix("Content-Length: 2\r\nDate: DATE\r\n\r\n"))
        #expect(serialize(HTTPResponse(status: 204)) == "HTTP/1.1 204 No Content\r\nX-Request-Id: rid\r\nDate: DATE\r\n\r\n")
    }

    @Test func serializerNeutralizesHeaderInjection() {
        var response = HTTPResponse(status: 200)
        response.headers.add("X-Evil", "a\r\nSet-Cookie: stolen")
        response.headers.add("Bad Name", "v")
        let text = serialize(response)
        #expect(text.contains("X-Evil: a Set-Cookie: stolen\r\n"))
        #expect(!text.contains("Bad Name"))
    }

    /// The handler's fields go out unless the server owns the name (in any case) or it is not a token.
    @Test func serializerKeepsOnlyTokenNamesTheServerDoesNotOwn() {
        var response = HTTPResponse(status: 200)
        for owned in ["content-length", "TRANSFER-ENCODING", "Connection", "keep-alive", "date", "x-request-id"] {
            response.headers.add(owned, "forged")
        }
        let kept = ["Content-Lengtx", "Dates", "X-Request-Ids", "a!#$%&'*+-.^_`|~Z09"]
        for name in kept { response.headers.add(name, "v") }
        for name in ["", "a b", "a:b", "a(b", "a\u{7F}", "caf\u{E9}", "a\tb", "a\"b"] { response.headers.add(name, "v") }
        let text = serialize(response)
        #expect(!text.contains("forged"))
        let lines = text.split(separator: "\r\n", omittingEmptySubsequences: false).map(String.init)
        #expect(Array(lines.dropFirst().prefix(kept.count)) == kept.map { "\($0): v" })
        #expect(lines.dropFirst(1 + kept.count).first?.hasPrefix("X-Request-Id: rid") == true)
    }

    @Test func requestIDs() {
        #expect(RequestID.accept("abc") == "abc")
        #expect(RequestID.accept("has space") != "has space")
        #expect(RequestID.accept("") != "")
        #expect(RequestID.accept(nil).count == 15)
        let generated = (0..<10_000).map { _ in RequestID.generate() }
        #expect(Set(generated).count == generated.count)
        let alphabet = Set("0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz-_")
        #expect(generated.allSatisfy { $0.count == 15 && $0.allSatisfy(alphabet.contains) && RequestID.isSane($0) })
        // All 64 digits turn up in every position: the bits are spread over the whole alphabet.
        for position in 0..<15 {
            #expect(Set(generated.map { Array($0)[position] }).count == 64, "position \(position)")
        }
    }

    @Test func userIDsAreOneTo128PrintableCharacters() {
        #expect(UserID(pathParameter: "1050")?.value == "1050")
        #expect(UserID(pathParameter: String(repeating: "a", count: 128)) != nil)
        #expect(UserID(pathParameter: String(repeating: "a", count: 129)) == nil)
        #expect(UserID(pathParameter: String(repeating: "é", count: 128)) != nil)  // scalars, not bytes
        #expect(UserID(pathParameter: "") == nil)
        #expect(UserID(pathParameter: "   ") == nil)
        #expect(UserID(pathParameter: "a b") != nil)
        #expect(UserID(pathParameter: "a\tb") == nil)
        #expect(UserID(pathParameter: "a\u{7F}") == nil)
        #expect(UserID(pathParameter: "\u{2003}") == nil)
        // Nothing but invisible format characters is blank too; inside an id they may stand.
        #expect(UserID(pathParameter: "\u{200D}") == nil && UserID(pathParameter: "\u{FEFF}") == nil && UserID(pathParameter: "\u{200F} \u{200D}") == nil)
        #expect(UserID(pathParameter: "\u{200F}abc") != nil)
        for invisible in ["\u{34F}", "\u{FE0F}", "\u{3164}", "\u{3164}\u{FE0F} "] { #expect(UserID(pathParameter: invisible) == nil, "\(invisible.unicodeScalars.first!.value)") }
    }

    /// Characters that print as nothing one could tell apart: line and paragraph separators, private use,
    /// unassigned code points and noncharacters; an emoji sequence's joiner stays.
    @Test(arguments: ["a\u{2028}b", "\u{2029}", "a\u{E000}", "a\u{F0000}", "a\u{378}", "a\u{FFFE}", "a\u{FFFF}", "a\u{10FFFF}"])
    func userIDsAreRefusedWithUnprintableCharacters(id: String) throws {
        #expect(UserID(pathParameter: id) == nil, "\(id.unicodeScalars.map(\.value))")
        #expect(throws: ProblemError.self) { try InputRules.userID(id) }
    }

    @Test func userIDsMayHoldEmojiSequencesAndOtherScripts() {
        for id in ["👩‍👩‍👧", "🏳️‍🌈", "ユーザー", "مستخدم", "a\u{A0}b"] { #expect(UserID(pathParameter: id) != nil, "\(id)") }
    }

    /// Receipts are read from their one base64 spelling: every real sample (with its line breaks) is, padding that
    /// is not what the length needs is not, and neither is what decodes to nothing.
    @Test func receiptDataIsCanonicalBase64() throws {
        for name in Fixtures.names(prefix: "receipt_", suffix: ".b64") {
            let text = String(decoding: try Fixtures.data(name), as: UTF8.self)
            let expected = try #require(Data(base64Encoded: text, options: .ignoreUnknownCharacters))
            #expect(try InputRules.receiptBytes(text) == Array(expected), "\(name)")
        }
        #expect(try InputRules.receiptBytes("YWJj") == Array("abc".utf8))
        #expect(try InputRules.receiptBytes("YW Jj\r\nYQ==") == Array("abca".utf8))
        for text in ["====", "YWJj=", "YWJj====", "YQ", "YQ=", "YQ===", "YW=Jj", "-_-_", "YR==", "abc"] {
            #expect(throws: ProblemError.self, "\(text)") { try InputRules.receiptBytes(text) }
        }
    }

    /// One spelling per id: the composed one (NFC). Swift would take `e` + U+0301 for `é`, PostgreSQL would not,
    /// and the cache (Swift) would answer one user with the other's entitlements.
    @Test func userIDsComeComposed() {
        let composed = "jos\u{E9}", decomposed = "jose\u{301}"
        #expect(composed == decomposed, "Swift compares by canonical equivalence")
        #expect(UserID(pathParameter: composed)?.value.utf8.elementsEqual(composed.utf8) == true)
        #expect(UserID(pathParameter: decomposed) == nil)
        #expect(UserID(pathParameter: "\u{1100}\u{1161}") == nil)  // Hangul jamo that compose into 가
        #expect(UserID(pathParameter: "\u{AC00}") != nil)
        #expect(throws: ProblemError.self) { try InputRules.userID(decomposed) }
    }

    @Test func httpDateFormat() {
        #expect(HTTPDate.format(784_111_777) == "Sun, 06 Nov 1994 08:49:37 GMT")
    }
}
