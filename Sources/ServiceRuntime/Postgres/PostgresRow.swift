import Foundation

/// A result column: its name and the OID of its type.
public struct PostgresColumn: Sendable, Equatable {
    /// The column name as the statement labelled it.
    public let name: String
    /// The OID of the column's type in `pg_type`.
    public let typeOID: UInt32
}

/// The columns of one result, shared by its rows.
final class PostgresColumnIndex: Sendable {
    let columns: [PostgresColumn]

    init(_ columns: [PostgresColumn]) {
        self.columns = columns
    }

    /// The position of the first column with this name. A scan: results have a few columns, and comparing
    /// names costs less than hashing one (and than building a dictionary for every result).
    func position(of name: String) -> Int? {
        columns.firstIndex { $0.name == name }
    }
}

/// One row of a result, its values in PostgreSQL's text output format.
///
/// `row["column"]` gives the raw text (`nil` for NULL or an unknown column). The typed accessors throw a
/// `PostgresError` of kind `.decoding` naming the column when it is missing, NULL or of another type; their
/// `optional…` variants return `nil` for NULL instead. Values decode through `PostgresDecodable`, which also
/// reads the elements of one-dimensional arrays (`row.array("ids", of: UUID.self)`).
public struct PostgresRow: Sendable {
    let index: PostgresColumnIndex
    let values: [String?]

    /// The column's text, `nil` when the value is NULL or there is no such column.
    public subscript(_ column: String) -> String? {
        index.position(of: column).flatMap { values[$0] }
    }

    /// The text of the column at `position`, `nil` when NULL.
    public subscript(_ position: Int) -> String? { values[position] }

    /// The row's columns.
    public var columns: [PostgresColumn] { index.columns }

    /// The value as text, whatever its type.
    public func string(_ column: String) throws -> String { try required(column, optionalString(column)) }
    /// An `int2`, `int4` or `int8` (or numeric text that fits).
    public func int(_ column: String) throws -> Int { try required(column, optionalInt(column)) }
    /// An integer that must fit 64 bits.
    public func int64(_ column: String) throws -> Int64 { try required(column, optionalInt64(column)) }
    /// A `bool` (`t` / `f`).
    public func bool(_ column: String) throws -> Bool { try required(column, optionalBool(column)) }
    /// A `float4`/`float8`/`numeric` value, `NaN` and `±Infinity` included.
    public func double(_ column: String) throws -> Double { try required(column, optionalDouble(column)) }
    /// A `timestamptz`, `timestamp` (read as UTC) or `date` value.
    public func date(_ column: String) throws -> Date { try required(column, optionalDate(column)) }
    /// A `uuid`.
    public func uuid(_ column: String) throws -> UUID { try required(column, optionalUUID(column)) }
    /// A `bytea` value.
    public func bytes(_ column: String) throws -> [UInt8] { try required(column, optionalBytes(column)) }
    /// A one-dimensional array of `Element` (`text[]` as `[String]`, `uuid[]` as `[UUID]`…); NULL elements
    /// decode only when `Element` is optional (`[String?]`).
    public func array<Element: PostgresDecodable>(_ column: String, of element: Element.Type) throws -> [Element] {
        try required(column, optionalArray(column, of: element))
    }

    /// `string(_:)`, or `nil` for NULL.
    public func optionalString(_ column: String) throws -> String? { try text(column) }
    /// `int(_:)`, or `nil` for NULL.
    public func optionalInt(_ column: String) throws -> Int? { try decode(column) }
    /// `int64(_:)`, or `nil` for NULL.
    public func optionalInt64(_ column: String) throws -> Int64? { try decode(column) }
    /// `bool(_:)`, or `nil` for NULL.
    public func optionalBool(_ column: String) throws -> Bool? { try decode(column) }
    /// `double(_:)`, or `nil` for NULL.
    public func optionalDouble(_ column: String) throws -> Double? { try decode(column) }
    /// `date(_:)`, or `nil` for NULL.
    public func optionalDate(_ column: String) throws -> Date? { try decode(column) }
    /// `uuid(_:)`, or `nil` for NULL.
    public func optionalUUID(_ column: String) throws -> UUID? { try decode(column) }
    /// `bytes(_:)`, or `nil` for NULL.
    public func optionalBytes(_ column: String) throws -> [UInt8]? {
        guard let text = try text(column) else { return nil }
        guard let bytes = PostgresBytea.decode(text) else { throw notA("bytea", column) }
        return bytes
    }
    /// `array(_:of:)`, or `nil` for NULL.
    public func optionalArray<Element: PostgresDecodable>(_ column: String, of element: Element.Type) throws -> [Element]? {
        guard let text = try text(column) else { return nil }
        guard let elements = PostgresArrayText.elements(text) else { throw notA("a one-dimensional array", column) }
        return try elements.map { element in
            guard let element else {
                guard let null = Element.postgresNull else {
                    throw PostgresError(kind: .decoding, message: "column \"\(column)\" holds a NULL element")
                }
                return null
            }
            guard let value = Element(postgresText: element) else {
                throw notA("an array of \(Element.postgresDescription)", column)
            }
            return value
        }
    }

    private func text(_ column: String) throws -> String? {
        guard let position = index.position(of: column) else {
            throw PostgresError(kind: .decoding, message: "the result has no column \"\(column)\"")
        }
        return values[position]
    }

    private func decode<T: PostgresDecodable>(_ column: String) throws -> T? {
        guard let text = try text(column) else { return nil }
        guard let value = T(postgresText: text) else { throw notA(T.postgresDescription, column) }
        return value
    }

    private func notA(_ description: String, _ column: String) -> PostgresError {
        PostgresError(kind: .decoding, message: "column \"\(column)\" is not \(description)")
    }

    private func required<T>(_ column: String, _ value: T?) throws -> T {
        guard let value else { throw PostgresError(kind: .decoding, message: "column \"\(column)\" is NULL") }
        return value
    }
}

/// What one statement returned.
public struct PostgresResult: Sendable {
    /// The rows, empty for statements that return none.
    public let rows: [PostgresRow]
    /// Rows inserted, updated, deleted, selected… as the command tag counts them; 0 when it has no count.
    public let affectedRows: Int
    /// The columns of `rows`.
    public let columns: [PostgresColumn]
    /// The command tag, such as `INSERT 0 1` or `SELECT 3`.
    public let command: String
}
