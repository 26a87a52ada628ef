import Foundation

extension PostgresJSON {
    /// JSON text already encoded as UTF-8 bytes (a `JSONEncoder` result).
    public init(_ data: Data) {
        self.init(String(decoding: data, as: UTF8.self))
    }

    /// `value` encoded with `JSONEncoder`.
    public init<T: Encodable>(encoding value: T) throws {
        self.init(try JSONEncoder().encode(value))
    }
}

extension PostgresResult {
    /// The one row a statement such as `INSERT … RETURNING` must give; a decoding error otherwise.
    public func single() throws -> PostgresRow {
        guard rows.count == 1, let row = rows.first else {
            throw PostgresError(kind: .decoding, message: "expected exactly one row, got \(rows.count)")
        }
        return row
    }
}
