/// A value that can be an element of an array parameter: `[String]` binds as one `text[]`, `[UUID]` as one
/// `uuid[]`, `[Int?]` as one `bigint[]` with NULL elements, and so on.
///
/// The array is sent in PostgreSQL's array text format, every element double-quoted with its `"` and `\`
/// escaped (so commas, braces, spaces, quotes, backslashes and the word NULL stay data), a `nil` element as an
/// unquoted `NULL`, and declared with the array type's OID. `[UInt8]` is the exception: it is `bytea`.
public protocol PostgresArrayElement: Sendable {
    /// The OID of the array type an array of these binds as (`text[]` for `String`, `uuid[]` for `UUID`…).
    static var postgresArrayTypeOID: UInt32 { get }
    /// The element in PostgreSQL's text input format, or `nil` for a NULL element.
    var postgresElementText: String? { get }
}

extension PostgresArrayElement where Self: PostgresEncodable {
    /// An element's text is its text as a parameter.
    public var postgresElementText: String? { postgresText() }
}

extension Optional: PostgresArrayElement where Wrapped: PostgresArrayElement {
    /// An array of optionals is the wrapped type's array, `nil` elements NULL.
    public static var postgresArrayTypeOID: UInt32 { Wrapped.postgresArrayTypeOID }
    /// The wrapped element's text; `nil` (an unquoted `NULL`) for `nil`.
    public var postgresElementText: String? { self?.postgresElementText }
}

extension UInt8: PostgresArrayElement {
    /// `[UInt8?]` is a `smallint[]`; `[UInt8]` itself is `bytea`.
    public static var postgresArrayTypeOID: UInt32 { PostgresTypeOID.int2Array }
    /// The decimal value, as a `smallint[]` element.
    public var postgresElementText: String? { String(self) }
}

extension Array: PostgresEncodable where Element: PostgresArrayElement {
    /// The element's array type; `bytea` for `[UInt8]`.
    public static var postgresTypeOID: UInt32 {
        Element.self == UInt8.self ? PostgresTypeOID.bytea : Element.postgresArrayTypeOID
    }

    /// The array literal (`{"a","b",NULL}`); for `[UInt8]` the bytes in `bytea` hex format.
    public func postgresText() -> String? {
        // A type check, not `as? [UInt8]`: an empty array of any element type casts to `[UInt8]`.
        if Element.self == UInt8.self { return PostgresBytea.hex(self as! [UInt8]) }
        return PostgresArrayText.literal(self)
    }
}

/// PostgreSQL's one-dimensional array text format, written for parameters and read from results.
enum PostgresArrayText {
    private static let quote = UInt8(ascii: "\""), backslash = UInt8(ascii: "\\"), comma = UInt8(ascii: ",")
    private static let open = UInt8(ascii: "{"), close = UInt8(ascii: "}")

    /// `{"e1","e2",NULL}`: every element quoted, its quotes and backslashes escaped.
    static func literal<Element: PostgresArrayElement>(_ elements: [Element]) -> String {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(2 + elements.count * 24)
        bytes.append(open)
        for (index, element) in elements.enumerated() {
            if index > 0 { bytes.append(comma) }
            guard var text = element.postgresElementText else {
                bytes.append(contentsOf: "NULL".utf8)
                continue
            }
            bytes.append(quote)
            text.withUTF8 { utf8 in
                // Most elements (user IDs, product IDs) need no escape: one copy instead of a byte at a time.
                guard utf8.contains(where: { $0 == quote || $0 == backslash }) else { return bytes.append(contentsOf: utf8) }
                for byte in utf8 {
                    if byte == quote || byte == backslash { bytes.append(backslash) }
                    bytes.append(byte)
                }
            }
            bytes.append(quote)
        }
        bytes.append(close)
        return String(decoding: bytes, as: UTF8.self)
    }

    /// The elements of a one-dimensional array as the server writes it (`{a,"b c",NULL}`, optionally after a
    /// bounds decoration such as `[0:2]=`), `nil` elements for NULL; `nil` when the text is not such an array.
    static func elements(_ text: String) -> [String?]? {
        var utf8 = Array(text.utf8)[...]
        if utf8.first == UInt8(ascii: "[") {
            guard let equals = utf8.firstIndex(of: UInt8(ascii: "=")) else { return nil }
            utf8 = utf8[(equals + 1)...]
        }
        guard utf8.first == open, utf8.last == close else { return nil }
        utf8 = utf8.dropFirst().dropLast()
        var elements: [String?] = []
        guard !utf8.isEmpty else { return elements }
        var index = utf8.startIndex
        while true {
            var element: [UInt8] = []
            let quoted = index < utf8.endIndex && utf8[index] == quote
            if quoted { index += 1 }
            while true {
                guard index < utf8.endIndex else {
                    if quoted { return nil }  // an unterminated quote
                    break
                }
                var byte = utf8[index]
                if quoted ? byte == quote : byte == comma { break }
                // Unquoted braces or quotes: a nested array (not read) or no array at all.
                guard quoted || (byte != open && byte != close && byte != quote) else { return nil }
                if byte == backslash {
                    index += 1
                    guard index < utf8.endIndex else { return nil }
                    byte = utf8[index]
                }
                element.append(byte)
                index += 1
            }
            if quoted { index += 1 }
            if !quoted && element.count == 4 && String(decoding: element, as: UTF8.self).lowercased() == "null" {
                elements.append(nil)
            } else {
                elements.append(String(decoding: element, as: UTF8.self))
            }
            guard index < utf8.endIndex else { return elements }
            guard utf8[index] == comma else { return nil }
            index += 1
        }
    }
}
