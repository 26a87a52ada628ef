import Foundation
import Timestamps

/// A value that can be bound as a query parameter.
///
/// Parameters are always sent separately from the SQL text (`$1`, `$2`…), in PostgreSQL's text format, so no
/// value is ever spliced into a statement.
///
/// Declared types: `String` none (the server infers it, so a string binds to text, enums, uuid…), `Int`/`Int64`
/// `bigint`, `Int32` `integer`, `Bool` `boolean`, `Double` `double precision`, `Date` `timestamptz`, `UUID`
/// `uuid`, `Duration` `interval`, `[UInt8]`/`Data` `bytea`, `PostgresJSON` `jsonb`, `nil` the wrapped type.
/// Arrays of these are arrays (`[String]` `text[]`, `[UUID]` `uuid[]`, `[Int]` `bigint[]`, `[Date?]`
/// `timestamptz[]` with NULL elements…; see ``PostgresArrayElement``), so a list goes in as one parameter:
/// `WHERE id = ANY($1)`, `unnest($1::text[], $2::timestamptz[])`. A function that takes `integer` needs a cast
/// for an `Int`: `pg_terminate_backend($1::int)`.
public protocol PostgresEncodable: Sendable {
    /// The type OID the parameter is declared with; 0 lets the server infer it from the statement.
    static var postgresTypeOID: UInt32 { get }
    /// The value in PostgreSQL's text input format, or `nil` for SQL NULL.
    func postgresText() -> String?
}

/// Type OIDs from `pg_type` that parameters are declared with.
enum PostgresTypeOID {
    static let unspecified: UInt32 = 0
    static let bool: UInt32 = 16
    static let bytea: UInt32 = 17
    static let int8: UInt32 = 20
    static let int2: UInt32 = 21
    static let int4: UInt32 = 23
    static let float8: UInt32 = 701
    static let boolArray: UInt32 = 1000
    static let byteaArray: UInt32 = 1001
    static let int2Array: UInt32 = 1005
    static let int4Array: UInt32 = 1007
    static let textArray: UInt32 = 1009
    static let int8Array: UInt32 = 1016
    static let float8Array: UInt32 = 1022
    static let timestamptz: UInt32 = 1184
    static let timestamptzArray: UInt32 = 1185
    static let interval: UInt32 = 1186
    static let intervalArray: UInt32 = 1187
    static let uuid: UInt32 = 2950
    static let uuidArray: UInt32 = 2951
    static let jsonb: UInt32 = 3802
    static let jsonbArray: UInt32 = 3807
}

extension String: PostgresEncodable, PostgresArrayElement {
    /// Unspecified, so a string binds to whatever the statement needs there (text, varchar, an enum, a uuid…).
    public static var postgresTypeOID: UInt32 { PostgresTypeOID.unspecified }
    /// `text[]`.
    public static var postgresArrayTypeOID: UInt32 { PostgresTypeOID.textArray }
    /// The string as is; one holding a NUL byte is refused (`.invalidParameter`) when the statement is made.
    public func postgresText() -> String? { self }
}

extension Int: PostgresEncodable, PostgresArrayElement {
    /// `bigint` (`int8`); a function taking `integer` needs a cast (`$1::int`).
    public static var postgresTypeOID: UInt32 { PostgresTypeOID.int8 }
    /// `bigint[]`.
    public static var postgresArrayTypeOID: UInt32 { PostgresTypeOID.int8Array }
    /// Decimal digits, with `-` when negative.
    public func postgresText() -> String? { String(self) }
}

extension Int64: PostgresEncodable, PostgresArrayElement {
    /// `bigint` (`int8`).
    public static var postgresTypeOID: UInt32 { PostgresTypeOID.int8 }
    /// `bigint[]`.
    public static var postgresArrayTypeOID: UInt32 { PostgresTypeOID.int8Array }
    /// Decimal digits, with `-` when negative.
    public func postgresText() -> String? { String(self) }
}

extension Int32: PostgresEncodable, PostgresArrayElement {
    /// `integer` (`int4`).
    public static var postgresTypeOID: UInt32 { PostgresTypeOID.int4 }
    /// `integer[]`.
    public static var postgresArrayTypeOID: UInt32 { PostgresTypeOID.int4Array }
    /// Decimal digits, with `-` when negative.
    public func postgresText() -> String? { String(self) }
}

extension Bool: PostgresEncodable, PostgresArrayElement {
    /// `boolean`.
    public static var postgresTypeOID: UInt32 { PostgresTypeOID.bool }
    /// `boolean[]`.
    public static var postgresArrayTypeOID: UInt32 { PostgresTypeOID.boolArray }
    /// `true` or `false`.
    public func postgresText() -> String? { self ? "true" : "false" }
}

extension Double: PostgresEncodable, PostgresArrayElement {
    /// `double precision` (`float8`).
    public static var postgresTypeOID: UInt32 { PostgresTypeOID.float8 }
    /// `double precision[]`.
    public static var postgresArrayTypeOID: UInt32 { PostgresTypeOID.float8Array }
    /// Swift's shortest round-trip decimal; `NaN`, `Infinity` and `-Infinity` as the server spells them.
    public func postgresText() -> String? {
        if isNaN { return "NaN" }
        if isInfinite { return self < 0 ? "-Infinity" : "Infinity" }
        return String(self)
    }
}

extension Date: PostgresEncodable, PostgresArrayElement {
    /// Sent as `timestamptz` in RFC 3339 with milliseconds, UTC (``RFC3339/Dialect/postgreSQL``).
    public static var postgresTypeOID: UInt32 { PostgresTypeOID.timestamptz }
    /// `timestamptz[]`.
    public static var postgresArrayTypeOID: UInt32 { PostgresTypeOID.timestamptzArray }
    /// UTC with milliseconds, truncated (`2026-11-22T01:20:00.123Z`); `infinity`/`-infinity` past the server's range.
    public func postgresText() -> String? { RFC3339.string(from: self, dialect: .postgreSQL) }
}

extension UUID: PostgresEncodable, PostgresArrayElement {
    /// `uuid`.
    public static var postgresTypeOID: UInt32 { PostgresTypeOID.uuid }
    /// `uuid[]`.
    public static var postgresArrayTypeOID: UInt32 { PostgresTypeOID.uuidArray }
    /// The hyphenated form in lower case, as the server writes it.
    public func postgresText() -> String? { uuidString.lowercased() }
}

extension Duration: PostgresEncodable, PostgresArrayElement {
    /// Sent as an `interval` of whole microseconds (PostgreSQL's resolution; finer parts are dropped), so a
    /// lease or a delay is bound as what it is: `now() + $1`.
    public static var postgresTypeOID: UInt32 { PostgresTypeOID.interval }
    /// `interval[]`.
    public static var postgresArrayTypeOID: UInt32 { PostgresTypeOID.intervalArray }
    /// `<seconds> seconds <microseconds> microseconds`, which the server adds up.
    public func postgresText() -> String? {
        let (seconds, attoseconds) = components
        return "\(seconds) seconds \(attoseconds / 1_000_000_000_000) microseconds"
    }
}

extension Data: PostgresEncodable, PostgresArrayElement {
    /// Sent as `bytea` in hex format.
    public static var postgresTypeOID: UInt32 { PostgresTypeOID.bytea }
    /// `bytea[]`.
    public static var postgresArrayTypeOID: UInt32 { PostgresTypeOID.byteaArray }
    /// `\x` then two lower-case hex digits per byte.
    public func postgresText() -> String? { PostgresBytea.hex(self) }
}

extension Optional: PostgresEncodable where Wrapped: PostgresEncodable {
    /// `nil` is SQL NULL, declared with the wrapped type.
    public static var postgresTypeOID: UInt32 { Wrapped.postgresTypeOID }
    /// `nil` (SQL NULL) for `nil`, else the wrapped value's text.
    public func postgresText() -> String? { self?.postgresText() }
}

/// A JSON document bound as `jsonb`; the text is sent as is and validated by the server.
public struct PostgresJSON: PostgresEncodable, PostgresArrayElement, Hashable {
    /// The JSON text.
    public let json: String
    /// Wraps JSON text to be bound as `jsonb`.
    public init(_ json: String) { self.json = json }
    /// `jsonb`: the server rejects text that is not JSON.
    public static var postgresTypeOID: UInt32 { PostgresTypeOID.jsonb }
    /// `jsonb[]`.
    public static var postgresArrayTypeOID: UInt32 { PostgresTypeOID.jsonbArray }
    /// The JSON text, unchanged.
    public func postgresText() -> String? { json }
}

/// `bytea` in PostgreSQL's hex format (`\x0a1b…`).
enum PostgresBytea {
    private static let digits = Array("0123456789abcdef".utf8)

    static func hex<Bytes: Sequence>(_ bytes: Bytes) -> String where Bytes.Element == UInt8 {
        var out: [UInt8] = [UInt8(ascii: "\\"), UInt8(ascii: "x")]
        for byte in bytes {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 0x0f)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Decodes hex-format output; `nil` when the text is not `\x` followed by pairs of hex digits.
    static func decode(_ text: String) -> [UInt8]? {
        let utf8 = Array(text.utf8)
        guard utf8.count >= 2, utf8[0] == UInt8(ascii: "\\"), utf8[1] == UInt8(ascii: "x"), utf8.count % 2 == 0 else { return nil }
        func nibble(_ c: UInt8) -> UInt8? {
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): c - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): c - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): c - UInt8(ascii: "A") + 10
            default: nil
            }
        }
        var bytes: [UInt8] = []
        bytes.reserveCapacity((utf8.count - 2) / 2)
        var i = 2
        while i < utf8.count {
            guard let high = nibble(utf8[i]), let low = nibble(utf8[i + 1]) else { return nil }
            bytes.append(high << 4 | low)
            i += 2
        }
        return bytes
    }
}
