import Foundation

/// One row of a result, its values in PostgreSQL's text output format: a view into the result's buffer.
///
/// `row["column"]` gives the raw text (`nil` for NULL or an unknown column). The typed accessors read a column
/// by name, or by a `PostgresColumn` the decoder resolved once for the whole result (`PostgresResult.column(_:)`),
/// which spares looking the name up in every row. They throw a `PostgresError` of kind `.decoding` naming the
/// column when it is missing, NULL or of another type; their `optional…` variants return `nil` for NULL instead.
/// Values decode straight from the buffer's bytes through `PostgresDecodable`, which also reads the elements of
/// one-dimensional arrays (`row.array("ids", of: UUID.self)`).
public struct PostgresRow: Sendable {
    let storage: PostgresResultStorage
    let index: Int

    /// The column's text, `nil` when the value is NULL or there is no such column.
    public subscript(_ column: String) -> String? {
        guard let position = storage.position(of: column) else { return nil }
        return try? decode(PostgresColumn(position: position))
    }

    /// The value as text, whatever its type.
    public func string(_ column: String) throws -> String { try value(column) }
    /// An `int2`, `int4` or `int8` (or numeric text that fits).
    public func int(_ column: String) throws -> Int { try value(column) }
    /// An integer that must fit 64 bits.
    public func int64(_ column: String) throws -> Int64 { try value(column) }
    /// A `bool` (`t` / `f`).
    public func bool(_ column: String) throws -> Bool { try value(column) }
    /// A `float4`/`float8`/`numeric` value, `NaN` and `±Infinity` included.
    public func double(_ column: String) throws -> Double { try value(column) }
    /// A `timestamptz`, `timestamp` (read as UTC) or `date` value.
    public func date(_ column: String) throws -> Date { try value(column) }
    /// A `uuid`.
    public func uuid(_ column: String) throws -> UUID { try value(column) }
    /// A `bytea` value.
    public func bytes(_ column: String) throws -> [UInt8] {
        let column = try self.column(column)
        return try required(column, optionalBytes(column))
    }
    /// A one-dimensional array of `Element` (`text[]` as `[String]`, `uuid[]` as `[UUID]`…); NULL elements
    /// decode only when `Element` is optional (`[String?]`).
    public func array<Element: PostgresDecodable>(_ column: String, of element: Element.Type) throws -> [Element] {
        let column = try self.column(column)
        return try required(column, optionalArray(column, of: element))
    }

    /// `string(_:)`, or `nil` for NULL.
    public func optionalString(_ column: String) throws -> String? { try decode(self.column(column)) }
    /// `int(_:)`, or `nil` for NULL.
    public func optionalInt(_ column: String) throws -> Int? { try decode(self.column(column)) }
    /// `bool(_:)`, or `nil` for NULL.
    public func optionalBool(_ column: String) throws -> Bool? { try decode(self.column(column)) }
    /// `date(_:)`, or `nil` for NULL.
    public func optionalDate(_ column: String) throws -> Date? { try decode(self.column(column)) }
    /// `uuid(_:)`, or `nil` for NULL.
    public func optionalUUID(_ column: String) throws -> UUID? { try decode(self.column(column)) }
    /// `bytes(_:)`, or `nil` for NULL.
    public func optionalBytes(_ column: String) throws -> [UInt8]? { try optionalBytes(self.column(column)) }
    /// `array(_:of:)`, or `nil` for NULL.
    public func optionalArray<Element: PostgresDecodable>(_ column: String, of element: Element.Type) throws -> [Element]? {
        try optionalArray(self.column(column), of: element)
    }

    /// `string(_:)` of a column resolved once for the result.
    public func string(_ column: PostgresColumn) throws -> String { try required(column, decode(column)) }
    /// `int(_:)` of a column resolved once for the result.
    public func int(_ column: PostgresColumn) throws -> Int { try required(column, decode(column)) }
    /// `bool(_:)` of a column resolved once for the result.
    public func bool(_ column: PostgresColumn) throws -> Bool { try required(column, decode(column)) }
    /// `date(_:)` of a column resolved once for the result.
    public func date(_ column: PostgresColumn) throws -> Date { try required(column, decode(column)) }
    /// `optionalString(_:)` of a column resolved once for the result.
    public func optionalString(_ column: PostgresColumn) throws -> String? { try decode(column) }
    /// `optionalInt(_:)` of a column resolved once for the result.
    public func optionalInt(_ column: PostgresColumn) throws -> Int? { try decode(column) }
    /// `optionalDate(_:)` of a column resolved once for the result.
    public func optionalDate(_ column: PostgresColumn) throws -> Date? { try decode(column) }

    /// Runs `body` on the text bytes of `column`, valid only inside it: for comparing a value without making a
    /// `String` of it. Throws as the typed accessors do when the value is NULL.
    public func withBytes<T>(_ column: PostgresColumn, _ body: (UnsafeBufferPointer<UInt8>) throws -> T) throws -> T {
        try storage.withValue(index, column.position) { try body(try required(column, $0)) }
    }

    private func optionalBytes(_ column: PostgresColumn) throws -> [UInt8]? {
        guard let text: String = try decode(column) else { return nil }
        guard let bytes = PostgresBytea.decode(text) else { throw notA("bytea", column) }
        return bytes
    }

    private func optionalArray<Element: PostgresDecodable>(_ column: PostgresColumn, of element: Element.Type) throws -> [Element]? {
        guard let text: String = try decode(column) else { return nil }
        guard let elements = PostgresArrayText.elements(text) else { throw notA("a one-dimensional array", column) }
        return try elements.map { element in
            guard var element else {
                guard let null = Element.postgresNull else {
                    throw PostgresError(kind: .decoding, message: "column \"\(storage.name(column.position))\" holds a NULL element")
                }
                return null
            }
            guard let value = element.withUTF8({ Element(postgresBytes: $0) }) else {
                throw notA("an array of \(Element.postgresDescription)", column)
            }
            return value
        }
    }

    private func value<T: PostgresDecodable>(_ name: String) throws -> T {
        let column = try self.column(name)
        return try required(column, decode(column))
    }

    private func column(_ name: String) throws -> PostgresColumn { try storage.column(name) }

    private func decode<T: PostgresDecodable>(_ column: PostgresColumn) throws -> T? {
        try storage.withValue(index, column.position) { bytes in
            guard let bytes else { return nil }
            guard let value = T(postgresBytes: bytes) else { throw notA(T.postgresDescription, column) }
            return value
        }
    }

    private func notA(_ description: String, _ column: PostgresColumn) -> PostgresError {
        PostgresError(kind: .decoding, message: "column \"\(storage.name(column.position))\" is not \(description)")
    }

    private func required<T>(_ column: PostgresColumn, _ value: T?) throws -> T {
        guard let value else {
            throw PostgresError(kind: .decoding, message: "column \"\(storage.name(column.position))\" is NULL")
        }
        return value
    }
}
