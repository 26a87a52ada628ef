/// The column names and values of one result in one buffer, copied once out of libpq's memory: every name and
/// every value back to back as UTF-8 text, and where each lies. Rows (`PostgresRow`) are views into it, so a
/// result costs a few allocations however many rows and values it has, and a value becomes a `String` only when
/// asked for one.
final class PostgresResultStorage: Sendable {
    /// Where one name or value lies in `bytes`.
    private struct Span {
        /// Its first byte.
        let offset: Int
        /// Its length in bytes; `-1` for NULL.
        let length: Int32
    }

    let columnCount: Int
    let rowCount: Int
    /// The column names, then the values row by row.
    private let bytes: [UInt8]
    /// The span of each column name, then of each value row by row.
    private let spans: [Span]

    /// Copies `columnCount` names and `rowCount` rows of values: `name(column)` and `value(row, column)` give
    /// each one's bytes, `nil` for NULL, valid until the initializer returns.
    init(columnCount: Int, rowCount: Int,
         name: (Int) -> UnsafeBufferPointer<UInt8>,
         value: (_ row: Int, _ column: Int) -> UnsafeBufferPointer<UInt8>?) {
        var spans: [Span] = []
        spans.reserveCapacity(columnCount * (rowCount + 1))
        var total = 0
        func add(_ text: UnsafeBufferPointer<UInt8>?) {
            let length = text?.count ?? -1
            spans.append(Span(offset: total, length: Int32(length)))
            total += max(length, 0)
        }
        for column in 0..<columnCount { add(name(column)) }
        for row in 0..<rowCount {
            for column in 0..<columnCount { add(value(row, column)) }
        }
        bytes = [UInt8](unsafeUninitializedCapacity: total) { buffer, count in
            var index = 0
            func copy(_ text: UnsafeBufferPointer<UInt8>?) {
                guard let text, let source = text.baseAddress, !text.isEmpty else { return }
                (buffer.baseAddress! + spans[index].offset).initialize(from: source, count: text.count)
            }
            for column in 0..<columnCount {
                copy(name(column))
                index += 1
            }
            for row in 0..<rowCount {
                for column in 0..<columnCount {
                    copy(value(row, column))
                    index += 1
                }
            }
            count = total
        }
        self.spans = spans
        self.columnCount = columnCount
        self.rowCount = rowCount
    }

    /// The name of the column at `position`.
    func name(_ position: Int) -> String {
        withBytes(of: spans[position]) { String(decoding: $0!, as: UTF8.self) }
    }

    /// The position of the first column named `name`. A scan: results have a few columns, and comparing bytes
    /// costs less than hashing a name (and than building a dictionary for every result).
    func position(of name: String) -> Int? {
        var name = name
        return name.withUTF8 { wanted in
            (0..<columnCount).first { column in
                withBytes(of: spans[column]) { $0!.sameBytes(as: wanted) }
            }
        }
    }

    /// Runs `body` on the bytes of the value in `column` of `row`, `nil` when it is NULL.
    func withValue<T>(_ row: Int, _ column: Int, _ body: (UnsafeBufferPointer<UInt8>?) throws -> T) rethrows -> T {
        try withBytes(of: spans[columnCount * (row + 1) + column], body)
    }

    private func withBytes<T>(of span: Span, _ body: (UnsafeBufferPointer<UInt8>?) throws -> T) rethrows -> T {
        guard span.length >= 0 else { return try body(nil) }
        return try bytes.withUnsafeBufferPointer { all in
            try body(UnsafeBufferPointer(rebasing: all[span.offset..<span.offset + Int(span.length)]))
        }
    }
}
