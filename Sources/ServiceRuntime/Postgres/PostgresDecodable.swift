import Foundation
import Timestamps

/// A value that can be read from PostgreSQL's text output: a column (`PostgresRow`'s typed accessors) or an
/// element of an array column (`PostgresRow.array(_:of:)`).
public protocol PostgresDecodable: Sendable {
    /// What the value is, for the decoding error that names a column holding something else ("a UUID").
    static var postgresDescription: String { get }
    /// The value the UTF-8 text `bytes` holds in the server's output format; `nil` when it holds none of this
    /// type. Read straight from a result's buffer, so numbers, booleans and timestamps need no `String`.
    init?(postgresBytes bytes: UnsafeBufferPointer<UInt8>)
    /// What SQL NULL decodes as: nothing (an error) for every type but `Optional`, whose NULL is `nil`.
    static var postgresNull: Self? { get }
}

extension PostgresDecodable {
    /// `nil`: SQL NULL is a decoding error for every type but `Optional`.
    public static var postgresNull: Self? { nil }
}

extension String: PostgresDecodable {
    /// `text`; never shown in practice, as every value's text decodes as a `String`.
    public static var postgresDescription: String { "text" }
    /// The bytes as UTF-8, invalid sequences replaced by U+FFFD; never nil.
    public init?(postgresBytes bytes: UnsafeBufferPointer<UInt8>) { self.init(decoding: bytes, as: UTF8.self) }
}

extension Int: PostgresDecodable {
    /// An `int2`, `int4` or `int8` (or numeric text that fits).
    public static var postgresDescription: String { "an integer" }
    /// Decimal digits after an optional sign; nil for anything else or a value outside `Int`'s range.
    public init?(postgresBytes bytes: UnsafeBufferPointer<UInt8>) { self.init(decimal: bytes) }
}

extension Int64: PostgresDecodable {
    /// An `int2`, `int4` or `int8` (or numeric text that fits).
    public static var postgresDescription: String { "a 64-bit integer" }
    /// Decimal digits after an optional sign; nil for anything else or a value outside `Int64`'s range.
    public init?(postgresBytes bytes: UnsafeBufferPointer<UInt8>) { self.init(decimal: bytes) }
}

extension Int32: PostgresDecodable {
    /// An `int2` or `int4` (or an `int8` whose value fits in 32 bits).
    public static var postgresDescription: String { "a 32-bit integer" }
    /// Decimal digits after an optional sign; nil for anything else or a value outside `Int32`'s range.
    public init?(postgresBytes bytes: UnsafeBufferPointer<UInt8>) { self.init(decimal: bytes) }
}

extension FixedWidthInteger {
    /// Decimal digits after an optional sign, as the server writes integers; `nil` for anything else and for
    /// numbers this type cannot hold.
    fileprivate init?(decimal bytes: UnsafeBufferPointer<UInt8>) {
        var digits = bytes[...]
        let negative = digits.first == UInt8(ascii: "-")
        if negative || digits.first == UInt8(ascii: "+") { digits = digits.dropFirst() }
        guard !digits.isEmpty else { return nil }
        var value: Self = 0
        for byte in digits {
            let digit = byte &- UInt8(ascii: "0")
            guard digit < 10 else { return nil }
            // Negative numbers accumulate downwards, so the type's minimum fits.
            let (shifted, overflow) = value.multipliedReportingOverflow(by: 10)
            let (next, carry) = negative
                ? shifted.subtractingReportingOverflow(Self(digit)) : shifted.addingReportingOverflow(Self(digit))
            guard !overflow, !carry else { return nil }
            value = next
        }
        self = value
    }
}

extension Bool: PostgresDecodable {
    /// `t` or `f`.
    public static var postgresDescription: String { "a boolean" }
    /// `t` is true, `f` false, as the server writes booleans; nil for any other text.
    public init?(postgresBytes bytes: UnsafeBufferPointer<UInt8>) {
        guard bytes.count == 1 else { return nil }
        switch bytes[0] {
        case UInt8(ascii: "t"): self = true
        case UInt8(ascii: "f"): self = false
        default: return nil
        }
    }
}

extension Double: PostgresDecodable {
    /// A `float4`/`float8`/`numeric` value, `NaN` and `±Infinity` included.
    public static var postgresDescription: String { "a number" }
    /// The server's `NaN`, `Infinity` and `-Infinity`, or text `Double(_:)` parses; nil otherwise.
    public init?(postgresBytes bytes: UnsafeBufferPointer<UInt8>) {
        let text = String(decoding: bytes, as: UTF8.self)
        switch text {
        case "NaN": self = .nan
        case "Infinity": self = .infinity
        case "-Infinity": self = -.infinity
        default: self.init(text)
        }
    }
}

extension Date: PostgresDecodable {
    /// A `timestamptz`, `timestamp` (read as UTC) or `date` in the server's ISO output
    /// (``RFC3339/Dialect/postgreSQL``).
    public static var postgresDescription: String { "a timestamp" }
    /// Parsed with ``RFC3339/Dialect/postgreSQL``; nil for text that is no such timestamp or date.
    public init?(postgresBytes bytes: UnsafeBufferPointer<UInt8>) {
        guard let date = RFC3339.date(utf8: bytes, dialect: .postgreSQL) else { return nil }
        self = date
    }
}

extension UUID: PostgresDecodable {
    /// A `uuid` (or text in its hyphenated form).
    public static var postgresDescription: String { "a UUID" }
    /// The hyphenated form the server writes, read by `UUID(uuidString:)`; nil for other text.
    public init?(postgresBytes bytes: UnsafeBufferPointer<UInt8>) { self.init(uuidString: String(decoding: bytes, as: UTF8.self)) }
}

extension Optional: PostgresDecodable where Wrapped: PostgresDecodable {
    /// The wrapped type's: only a non-NULL value can fail to decode.
    public static var postgresDescription: String { Wrapped.postgresDescription }
    /// The wrapped value; nil (a decoding error) when it does not decode. NULL never comes here (`postgresNull`).
    public init?(postgresBytes bytes: UnsafeBufferPointer<UInt8>) {
        guard let value = Wrapped(postgresBytes: bytes) else { return nil }
        self = .some(value)
    }
    /// NULL is `nil`.
    public static var postgresNull: Self? { .some(nil) }
}
