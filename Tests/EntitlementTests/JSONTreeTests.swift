import EntitlementModel
import Foundation
import Testing
@testable import AppStore

/// The verifier's JSON reader: strict RFC 8259 parsing, and a `Decoder` that gives the model's types what
/// Foundation's `JSONDecoder` gives them.
@Suite struct JSONTreeTests {
    private func parses(_ text: String) -> Bool { (try? JSONTree.parse(Array(text.utf8))) != nil }

    @Test func acceptsJSON() throws {
        for text in [#"{}"#, #"[]"#, #" {"a": [1, -2.5e3, 0, true, false, null, "x\"\\\/\b\f\n\r\t\u00e9\ud83d\ude00"]} "#,
                     #""text""#, "0", "-0.0", "1E+2", #"{"a":{"b":{"c":[[]]}}}"#, "\t\n\r [ 1 ] \n"] {
            #expect(parses(text), "\(text)")
        }
        guard case .string(let text) = try JSONTree.parse(Array(#""\u00e9\ud83d\ude00é""#.utf8)) else { Issue.record("not a string"); return }
        #expect(text == "é😀é")
    }

    @Test func refusesWhatIsNotJSON() {
        let deep = String(repeating: "[", count: JSONTree.maximumDepth + 1) + String(repeating: "]", count: JSONTree.maximumDepth + 1)
        for text in ["", " ", "{", #"{"a":1,}"#, "[1,]", #"{"a" 1}"#, "{'a': 1}", "[01]", "[1.]", "[.5]", "[1e]", "[+1]", "[NaN]",
                     "[Infinity]", "// c\n{}", "{} {}", "[1] x", #"["\x"]"#, #"["\u12"]"#, #"["\ud800"]"#, #"["\udc00x"]"#,
                     "[\"a\u{01}\"]", "[tru]", "[nul]", #"{"a":}"#, #"{1: 2}"#, deep] {
            #expect(!parses(text), "\(text.prefix(40))")
        }
        #expect(parses(String(repeating: "[", count: JSONTree.maximumDepth) + String(repeating: "]", count: JSONTree.maximumDepth)))
        #expect((try? JSONTree.parse([0x22, 0xC3, 0x28, 0x22])) == nil, "invalid UTF-8 in a string")
    }

    @Test func ofARepeatedMemberTheLastCounts() throws {
        guard case .object(let object) = try JSONTree.parse(Array(#"{"a": 1, "b": 2, "a": 3}"#.utf8)) else { Issue.record("not an object"); return }
        guard case .number("3")? = object["a"] else { Issue.record("\(String(describing: object["a"]))"); return }
        #expect(object.names == ["a", "b"])
        // Names match by their bytes: the Kelvin sign is "K" to Swift's `==`, not to JSON.
        guard case .object(let kelvin) = try JSONTree.parse(Array(#"{"\u212Aey": 1, "é": 2}"#.utf8)) else { Issue.record("not an object"); return }
        #expect(kelvin["Key"] == nil)
        #expect(kelvin["\u{212A}ey"] != nil && kelvin["é"] != nil && kelvin["e\u{301}"] == nil)
        let many = "{" + (0..<100).map { "\"k\($0)\": \($0)" }.joined(separator: ",") + ", \"k7\": \"last\"}"
        guard case .object(let large) = try JSONTree.parse(Array(many.utf8)), case .string("last")? = large["k7"], case .number("99")? = large["k99"] else {
            Issue.record("a large object is not looked up by name"); return
        }
        #expect(large["k100"] == nil)
    }

    /// Every V2 sample of the fixtures (decoded payloads, and the payloads of every signed one) decodes to the
    /// same model values through `JSONTreeDecoder` as through `JSONDecoder`.
    @Test func theModelDecodesAlikeThroughEitherDecoder() throws {
        var payloads: [(String, Data)] = []
        for name in try FileManager.default.contentsOfDirectory(atPath: Fixtures.directory.path).sorted() {
            let data = try Fixtures.data(name)
            if name.hasPrefix("decoded_") { payloads.append((name, data)) }
            if name.hasSuffix(".jws") {
                let text = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
                payloads.append((name, try Self.payload(of: text)))
            }
        }
        #expect(payloads.count >= 20)
        for (name, data) in payloads {
            try Self.expectAlike(AppStoreTransactionV2.self, data, name)
            try Self.expectAlike(AppStoreRenewalInfoV2.self, data, name)
            try Self.expectAlike(AppStoreNotificationV2.self, data, name)
            try Self.expectAlike(AppStoreAppTransaction.self, data, name)
        }
    }

    @Test func decodingErrorsNameTheField() throws {
        for (json, path) in [(#"{"transactionId": "1", "productId": "p", "purchaseDate": 1, "quantity": "one"}"#, "quantity"),
                             (#"{"transactionId": "1", "productId": "p"}"#, "purchaseDate"),
                             (#"{"notificationType": "TEST", "data": 5}"#, "data"),
                             (#"{"notificationType": "TEST", "data": {"environment": []}}"#, "data.environment")] {
            do {
                let tree = try JSONTree.parse(Array(json.utf8))
                if path.hasPrefix("data") {
                    _ = try AppStoreNotificationV2(from: JSONTreeDecoder(tree))
                } else {
                    _ = try AppStoreTransactionV2(from: JSONTreeDecoder(tree))
                }
                Issue.record("\(json) decoded")
            } catch {
                #expect(AppStoreDecodingError(error).path == path, "\(json): \(error)")
            }
        }
    }

    @Test func integersDecodeOnlyWhenExact() throws {
        struct Numbers: Decodable { var small: Int8?; var exact: Int; var fraction: Int? }
        let decode = { (json: String) in try Numbers(from: JSONTreeDecoder(try JSONTree.parse(Array(json.utf8)))) }
        #expect(try decode(#"{"exact": 1e3}"#).exact == 1000)
        #expect(try decode(#"{"exact": 2.0, "small": 127}"#).small == 127)
        #expect(throws: DecodingError.self) { try decode(#"{"exact": 1.5}"#) }
        #expect(throws: DecodingError.self) { try decode(#"{"exact": 1, "small": 128}"#) }
        #expect(throws: DecodingError.self) { try decode(#"{"exact": "1"}"#) }
        #expect(throws: DecodingError.self) { try decode(#"{"exact": null}"#) }
        #expect(throws: DecodingError.self) { try decode(#"{}"#) }
        #expect(try decode(#"{"exact": 9223372036854775807, "fraction": null}"#).exact == .max)
    }

    /// The JSON of a compact JWS's payload.
    static func payload(of jws: String) throws -> Data {
        let segment = String(try #require(jws.split(separator: ".", omittingEmptySubsequences: false).dropFirst().first))
        let base64 = segment.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        return try #require(Data(base64Encoded: base64 + String(repeating: "=", count: (4 - base64.count % 4) % 4)))
    }

    private static func expectAlike<T: AppStoreDecodable & Equatable>(_ type: T.Type, _ data: Data, _ name: String) throws {
        let foundation = Result { try JSONDecoder().decode(T.self, from: data) }
        let ours = Result { try T(from: JSONTreeDecoder(try JSONTree.parse(Array(data)))) }
        switch (foundation, ours) {
        case (.success(let a), .success(let b)):
            #expect(a == b, "\(name) as \(T.self)")
        case (.failure(let a), .failure(let b)):
            #expect(AppStoreDecodingError(a).path == AppStoreDecodingError(b).path, "\(name) as \(T.self): \(a) / \(b)")
        default:
            Issue.record("\(name) as \(T.self): JSONDecoder \(foundation), ours \(ours)")
        }
    }
}
