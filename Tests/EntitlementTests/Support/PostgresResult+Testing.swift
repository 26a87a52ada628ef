@testable import ServiceRuntime

extension PostgresResult {
    /// A result without rows or columns, as a test double's statement returns it.
    static func empty(command: String, affectedRows: Int = 0) -> PostgresResult {
        PostgresResult(
            PostgresResultStorage(columnCount: 0, rowCount: 0, name: { _ in UnsafeBufferPointer(start: nil, count: 0) }, value: { _, _ in nil }),
            affectedRows: affectedRows, command: command)
    }
}

extension PostgresRow {
    /// Every value as text, `nil` for NULL, for comparing whole rows.
    var values: [String?] {
        (0..<storage.columnCount).map { position in
            storage.withValue(index, position) { $0.map { String(decoding: $0, as: UTF8.self) } }
        }
    }
}
