import ServiceRuntime

/// A JSON document parsed into values (RFC 8259, strictly: UTF-8, no trailing commas, no comments, no NaN,
/// nothing after the value), for the signed payloads the verifier reads on every request. Foundation's
/// `JSONDecoder` costs more than the ECDSA verification it would accompany; this parser and `JSONTreeDecoder`
/// read the same payloads for a fraction of that. Numbers keep their text, so that integers are read exactly.
/// Of an object's repeated member, the last one counts (as in Python's `json`, which Apple's library uses).
enum JSONTree: Sendable {
    case null
    case bool(Bool)
    case number(String)
    case string(String)
    case array([JSONTree])
    case object(JSONObject)

    /// Why a text is not JSON.
    struct SyntaxError: Error {
        var offset: Int
        var problem: String
    }

    /// Nesting deeper than this is refused (no App Store payload comes near it; the parser recurses).
    static let maximumDepth = 64

    /// Parses `bytes` as one JSON value.
    static func parse(_ bytes: some Collection<UInt8>) throws(SyntaxError) -> JSONTree {
        let parsed: Result<JSONTree, SyntaxError>? = bytes.withContiguousStorageIfAvailable { buffer in
            var parser = Parser(bytes: buffer)
            return Result { () throws(SyntaxError) in try parser.document() }
        }
        if let parsed { return try parsed.get() }
        return try parse(Array(bytes))
    }

    private struct Parser {
        let bytes: UnsafeBufferPointer<UInt8>
        var index = 0
        var depth = 0

        init(bytes: UnsafeBufferPointer<UInt8>) { self.bytes = bytes }

        mutating func document() throws(SyntaxError) -> JSONTree {
            let value = try self.value()
            skipWhitespace()
            guard index == bytes.count else { throw fail("unexpected text after the value") }
            return value
        }

        func fail(_ problem: String) -> SyntaxError { SyntaxError(offset: index, problem: problem) }

        mutating func skipWhitespace() {
            while index < bytes.count, bytes[index] == 0x20 || bytes[index] == 0x0A || bytes[index] == 0x0D || bytes[index] == 0x09 {
                index += 1
            }
        }

        mutating func value() throws(SyntaxError) -> JSONTree {
            skipWhitespace()
            guard index < bytes.count else { throw fail("a value is missing") }
            switch bytes[index] {
            case UInt8(ascii: "{"): return try object()
            case UInt8(ascii: "["): return try array()
            case UInt8(ascii: "\""): return .string(try string())
            case UInt8(ascii: "t"): try literal("true"); return .bool(true)
            case UInt8(ascii: "f"): try literal("false"); return .bool(false)
            case UInt8(ascii: "n"): try literal("null"); return .null
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return .number(try number())
            default: throw fail("not a JSON value")
            }
        }

        mutating func literal(_ word: StaticString) throws(SyntaxError) {
            let count = word.utf8CodeUnitCount
            guard bytes.count - index >= count,
                  (0..<count).allSatisfy({ bytes[index + $0] == word.utf8Start[$0] }) else { throw fail("not a JSON value") }
            index += count
        }

        mutating func nest() throws(SyntaxError) {
            depth += 1
            guard depth <= JSONTree.maximumDepth else { throw fail("nested deeper than \(JSONTree.maximumDepth)") }
        }

        mutating func object() throws(SyntaxError) -> JSONTree {
            try nest()
            index += 1
            var members: [(name: String, value: JSONTree)] = []
            skipWhitespace()
            if index < bytes.count, bytes[index] == UInt8(ascii: "}") {
                index += 1
                depth -= 1
                return .object(JSONObject(members))
            }
            while true {
                skipWhitespace()
                guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { throw fail("expected a member name") }
                let name = try string()
                skipWhitespace()
                guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { throw fail("expected ':'") }
                index += 1
                members.append((name, try value()))
                skipWhitespace()
                guard index < bytes.count else { throw fail("unterminated object") }
                if bytes[index] == UInt8(ascii: ",") { index += 1; continue }
                guard bytes[index] == UInt8(ascii: "}") else { throw fail("expected ',' or '}'") }
                index += 1
                depth -= 1
                return .object(JSONObject(members))
            }
        }

        mutating func array() throws(SyntaxError) -> JSONTree {
            try nest()
            index += 1
            var elements: [JSONTree] = []
            skipWhitespace()
            if index < bytes.count, bytes[index] == UInt8(ascii: "]") {
                index += 1
                depth -= 1
                return .array(elements)
            }
            while true {
                elements.append(try value())
                skipWhitespace()
                guard index < bytes.count else { throw fail("unterminated array") }
                if bytes[index] == UInt8(ascii: ",") { index += 1; continue }
                guard bytes[index] == UInt8(ascii: "]") else { throw fail("expected ',' or ']'") }
                index += 1
                depth -= 1
                return .array(elements)
            }
        }

        /// A string starting at the opening quote; ends past the closing one.
        mutating func string() throws(SyntaxError) -> String {
            index += 1
            let start = index
            var high: UInt8 = 0
            while index < bytes.count {
                let byte = bytes[index]
                high |= byte
                if byte == UInt8(ascii: "\"") {
                    let text = UnsafeBufferPointer(rebasing: bytes[start..<index])
                    index += 1
                    // ASCII (nearly every string Apple sends) needs no UTF-8 validation.
                    if high < 0x80 { return String(decoding: text, as: UTF8.self) }
                    guard let validated = String(validating: text, as: UTF8.self) else { throw fail("a string is not UTF-8") }
                    return validated
                }
                if byte == UInt8(ascii: "\\") { return try escapedString(from: start) }
                guard byte >= 0x20 else { throw fail("a control character in a string") }
                index += 1
            }
            throw fail("unterminated string")
        }

        /// The rest of a string that holds escapes, whose text began at `start`.
        mutating func escapedString(from start: Int) throws(SyntaxError) -> String {
            var utf8 = Array(bytes[start..<index])
            while index < bytes.count {
                let byte = bytes[index]
                index += 1
                switch byte {
                case UInt8(ascii: "\""):
                    guard let text = String(validating: utf8, as: UTF8.self) else { throw fail("a string is not UTF-8") }
                    return text
                case UInt8(ascii: "\\"):
                    guard index < bytes.count else { throw fail("unterminated string") }
                    let escape = bytes[index]
                    index += 1
                    switch escape {
                    case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): utf8.append(escape)
                    case UInt8(ascii: "b"): utf8.append(0x08)
                    case UInt8(ascii: "f"): utf8.append(0x0C)
                    case UInt8(ascii: "n"): utf8.append(0x0A)
                    case UInt8(ascii: "r"): utf8.append(0x0D)
                    case UInt8(ascii: "t"): utf8.append(0x09)
                    case UInt8(ascii: "u"): utf8.append(contentsOf: try unicodeEscape())
                    default: throw fail("an unknown escape in a string")
                    }
                case 0..<0x20:
                    throw fail("a control character in a string")
                default:
                    utf8.append(byte)
                }
            }
            throw fail("unterminated string")
        }

        /// The UTF-8 of a `\uXXXX` escape (a surrogate pair takes two); a lone surrogate is refused.
        mutating func unicodeEscape() throws(SyntaxError) -> [UInt8] {
            var scalar = try hex4()
            if (0xD800..<0xDC00).contains(scalar) {
                guard bytes.count - index >= 2, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u") else {
                    throw fail("a lone surrogate in a string")
                }
                index += 2
                let low = try hex4()
                guard (0xDC00..<0xE000).contains(low) else { throw fail("a lone surrogate in a string") }
                scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
            }
            guard let unicode = Unicode.Scalar(scalar) else { throw fail("a lone surrogate in a string") }
            return Array(String(Character(unicode)).utf8)
        }

        mutating func hex4() throws(SyntaxError) -> UInt32 {
            guard bytes.count - index >= 4 else { throw fail("a short \\u escape") }
            var value: UInt32 = 0
            for _ in 0..<4 {
                let byte = bytes[index]
                let digit: UInt8
                switch byte {
                case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
                case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
                case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
                default: throw fail("a bad \\u escape")
                }
                value = value << 4 | UInt32(digit)
                index += 1
            }
            return value
        }

        /// A number's text, checked against JSON's grammar: `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`.
        mutating func number() throws(SyntaxError) -> String {
            let start = index
            if bytes[index] == UInt8(ascii: "-") { index += 1 }
            guard index < bytes.count, isDigit(bytes[index]) else { throw fail("a malformed number") }
            if bytes[index] == UInt8(ascii: "0") {
                index += 1
            } else {
                skipDigits()
            }
            if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
                index += 1
                guard index < bytes.count, isDigit(bytes[index]) else { throw fail("a malformed number") }
                skipDigits()
            }
            if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
                index += 1
                if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") { index += 1 }
                guard index < bytes.count, isDigit(bytes[index]) else { throw fail("a malformed number") }
                skipDigits()
            }
            return String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)
        }

        func isDigit(_ byte: UInt8) -> Bool { byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") }

        mutating func skipDigits() {
            while index < bytes.count, isDigit(bytes[index]) { index += 1 }
        }
    }
}

/// A JSON object's members in their order. A name is looked up from the end, so that of a repeated member the
/// last counts, and compared by its UTF-8 bytes (JSON names are not Unicode-normalised). The model's decoders
/// look names up several times per field, so each member has a tag (its length and first bytes) that a lookup
/// scans before comparing names; larger objects than Apple's are indexed once instead.
struct JSONObject: Sendable {
    private let members: [(name: String, value: JSONTree)]
    private let tags: [UInt64]
    private let index: [[UInt8]: Int]?

    /// Objects with more members than this get an index.
    private static let searched = 32

    init(_ members: [(name: String, value: JSONTree)]) {
        self.members = members
        if members.count > Self.searched {
            index = Dictionary(members.indices.map { (Array(members[$0].name.utf8), $0) }) { _, last in last }
            tags = []
        } else {
            index = nil
            tags = members.map { Self.tag($0.name) }
        }
    }

    /// The length of `name` and its first seven bytes, packed.
    private static func tag(_ name: String) -> UInt64 {
        var name = name
        return name.withUTF8 { bytes in
            var tag = UInt64(truncatingIfNeeded: bytes.count) << 56
            for position in 0..<min(bytes.count, 7) { tag |= UInt64(bytes[position]) << UInt64(position * 8) }
            return tag
        }
    }

    /// The value of the member `name` (its last occurrence).
    subscript(name: String) -> JSONTree? {
        if let index { return index[Array(name.utf8)].map { members[$0].value } }
        let tag = Self.tag(name)
        var position = tags.count
        while position > 0 {
            position -= 1
            if tags[position] == tag, Self.sameBytes(members[position].name, name) { return members[position].value }
        }
        return nil
    }

    /// Whether `a` and `b` are the same UTF-8 bytes (`==` would also match canonically equivalent spellings:
    /// "\u{212A}" is "K" to it).
    private static func sameBytes(_ a: String, _ b: String) -> Bool {
        var (a, b) = (a, b)
        return a.withUTF8 { a in b.withUTF8 { b in a.sameBytes(as: b) } }
    }

    /// The distinct member names.
    var names: [String] {
        var seen = Set<[UInt8]>()
        return members.compactMap { seen.insert(Array($0.name.utf8)).inserted ? $0.name : nil }
    }

    var isEmpty: Bool { members.isEmpty }
}
