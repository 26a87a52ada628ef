/// What one statement returned.
public struct PostgresResult: Sendable {
    /// The rows, empty for statements that return none.
    public let rows: [PostgresRow]
    /// Rows inserted, updated, deleted, selected… as the command tag counts them; 0 when it has no count.
    public let affectedRows: Int
    /// The command tag, such as `INSERT 0 1` or `SELECT 3`.
    public let command: String
    private let storage: PostgresResultStorage

    init(_ storage: PostgresResultStorage, affectedRows: Int, command: String) {
        self.storage = storage
        self.rows = (0..<storage.rowCount).map { PostgresRow(storage: storage, index: $0) }
        self.affectedRows = affectedRows
        self.command = command
    }

    /// The column named `name`, looked up once for a decoder that reads it from every row (`row.string(column)`);
    /// a `PostgresError` of kind `.decoding` when the result has no such column.
    public func column(_ name: String) throws -> PostgresColumn { try storage.column(name) }
}

/// A column of one result, found by name once (`PostgresResult.column(_:)`) and read by position from each of
/// its rows. Only meaningful for rows of the result that gave it.
public struct PostgresColumn: Sendable {
    let position: Int
}

extension PostgresResultStorage {
    /// The column named `name`; a decoding error naming it when there is none.
    func column(_ name: String) throws -> PostgresColumn {
        guard let position = position(of: name) else {
            throw PostgresError(kind: .decoding, message: "the result has no column \"\(name)\"")
        }
        return PostgresColumn(position: position)
    }
}
