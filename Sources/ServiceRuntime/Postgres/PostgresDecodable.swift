import Foundation
import Timestamps

/// A value that can be read from PostgreSQL's text output: a column (`PostgresRow`'s typed accessors) or an
/// element of an array column (`PostgresRow.array(_:of:)`).
public protocol PostgresDecodable: Sendable {
    /// What the value is, for the decoding error that names a column holding something else ("a UUID").
    static var postgresDescription: String { get }
    /// The value `text` holds in the server's output format; `nil` when it holds none of this type.
    init?(postgresText text: String)
    /// What SQL NULL decodes as: nothing (an error) for every type but `Optional`, whose NULL is `nil`.
    static var postgresNull: Self? { get }
}

extension PostgresDecodable {
    public static var postgresNull: Self? { nil }
}

extension String: PostgresDecodable {
    public static var postgresDescription: String { "text" }
    public init?(postgresText text: String) { self = text }
}

extension Int: PostgresDecodable {
    /// An `int2`, `int4` or `int8` (or numeric text that fits).
    public static var postgresDescription: String { "an integer" }
    public init?(postgresText text: String) { self.init(text) }
}

extension Int64: PostgresDecodable {
    public static var postgresDescription: String { "a 64-bit integer" }
    public init?(postgresText text: String) { self.init(text) }
}

extension Int32: PostgresDecodable {
    public static var postgresDescription: String { "a 32-bit integer" }
    public init?(postgresText text: String) { self.init(text) }
}

extension Bool: PostgresDecodable {
    /// `t` or `f`.
    public static var postgresDescription: String { "a boolean" }
    public init?(postgresText text: String) {
        switch text {
        case "t": self = true
        case "f": self = false
        default: return nil
        }
    }
}

extension Double: PostgresDecodable {
    /// A `float4`/`float8`/`numeric` value, `NaN` and `±Infinity` included.
    public static var postgresDescription: String { "a number" }
    public init?(postgresText text: String) {
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
    public init?(postgresText text: String) {
        guard let date = RFC3339.date(from: text, dialect: .postgreSQL) else { return nil }
        self = date
    }
}

extension UUID: PostgresDecodable {
    public static var postgresDescription: String { "a UUID" }
    public init?(postgresText text: String) { self.init(uuidString: text) }
}

extension Optional: PostgresDecodable where Wrapped: PostgresDecodable {
    public static var postgresDescription: String { Wrapped.postgresDescription }
    public init?(postgresText text: String) {
        guard let value = Wrapped(postgresText: text) else { return nil }
        self = .some(value)
    }
    /// NULL is `nil`.
    public static var postgresNull: Self? { .some(nil) }
}
