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
    public static var postgresNull: Self? { nil }
}

extension String: PostgresDecodable {
    public static var postgresDescription: String { "text" }
    public init?(postgresBytes bytes: UnsafeBufferPointer<UInt8>) { self.init(decoding: bytes, as: UTF8.self) }
}

extension Int: PostgresDecodable {
    /// An `int2`, `int4` or `int8` (or numeric text that fits).
    public static var postgresDescription: String { "an integer" }
    public init?(postgresBytes bytes: UnsafeBufferPointer<UInt8>) { self.init(decimal: bytes) }
}

extension Int64: PostgresDecodable {
    public static var postgresDescription: String { "a 64-bit integer" }
    public init?(postgresBytes bytes: UnsafeBufferPointer<UInt8>) { self.init(decimal: bytes) }
}

extension Int32: PostgresDecodable {
    public static var postgresDescription: String { "a 32-bit integer" }
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
    public init?(postgresBytes bytes: UnsafeBufferPointer<UInt8>) {
        guard let date = RFC3339.date(utf8: bytes, dialect: .postgreSQL) else { return nil }
        self = date
    }
}

extension UUID: PostgresDecodable {
    public static var postgresDescription: String { "a UUID" }
    public init?(postgresBytes bytes: UnsafeBufferPointer<UInt8>) { self.init(uuidString: String(decoding: bytes, as: UTF8.self)) }
}

extension Optional: PostgresDecodable where Wrapped: PostgresDecodable {
    public static var postgresDescription: String { Wrapped.postgresDescription }
    public init?(postgresBytes bytes: UnsafeBufferPointer<UInt8>) {
        guard let value = Wrapped(postgresBytes: bytes) else { return nil }
        self = .some(value)
    }
    /// NULL is `nil`.
    public static var postgresNull: Self? { .some(nil) }
}
