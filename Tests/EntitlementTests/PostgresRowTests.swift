import Foundation
import Testing
@testable import ServiceRuntime

/// Results copied into one buffer and read back through rows: by name and by a column resolved once, NULLs,
/// empty and non-ASCII text, many rows, and the errors naming the column. Decoding from bytes first, without
/// a server, then through PostgreSQL.
@Suite struct PostgresRowTests {
    /// A result built from Swift values, copied as libpq's is.
    static func result(_ names: [String], _ rows: [[String?]]) -> PostgresResult {
        // Each text in memory of its own, as libpq keeps them, alive until the storage has copied it.
        func memory(_ text: String) -> UnsafeBufferPointer<UInt8> {
            let memory = UnsafeMutableBufferPointer<UInt8>.allocate(capacity: text.utf8.count)
            _ = memory.initialize(from: text.utf8)
            return UnsafeBufferPointer(memory)
        }
        let nameMemory = names.map(memory), valueMemory = rows.flatMap { $0.map { $0.map(memory) } }
        defer { (nameMemory + valueMemory.compactMap { $0 }).forEach { $0.deallocate() } }
        let storage = PostgresResultStorage(columnCount: names.count, rowCount: rows.count,
                                            name: { nameMemory[$0] }, value: { valueMemory[$0 * names.count + $1] })
        return PostgresResult(storage, affectedRows: rows.count, command: "SELECT \(rows.count)")
    }

    @Test func integersParseWithinTheirWidthOnly() {
        func int<T: PostgresDecodable>(_ text: String, as: T.Type) -> T? {
            var text = text
            return text.withUTF8 { T(postgresBytes: $0) }
        }
        #expect(int("0", as: Int.self) == 0 && int("-42", as: Int.self) == -42 && int("+7", as: Int.self) == 7)
        #expect(int("9223372036854775807", as: Int.self) == .max && int("-9223372036854775808", as: Int64.self) == .min)
        #expect(int("9223372036854775808", as: Int.self) == nil && int("-9223372036854775809", as: Int64.self) == nil)
        #expect(int("2147483648", as: Int32.self) == nil && int("-2147483648", as: Int32.self) == .min)
        for text in ["", "-", "+", "1.5", " 1", "1 ", "1e3", "١"] {
            #expect(int(text, as: Int.self) == nil, "\(text)")
        }
        #expect(int("t", as: Bool.self) == true && int("f", as: Bool.self) == false)
        #expect(int("true", as: Bool.self) == nil && int("", as: Bool.self) == nil)
        #expect(int("", as: String.self) == "" && int("ü日本", as: String.self) == "ü日本")
    }

    @Test func rowsAreViewsOfOneBuffer() throws {
        let result = Self.result(["id", "note", "at", "flag"], [
            ["1", "ünïcödé ✓ 日本語 🎉", "2026-11-22 01:20:00+00", "t"],
            ["2", "", nil, "f"],
            [nil, nil, "infinity", nil],
        ])
        let id = try result.column("id"), note = try result.column("note"), at = try result.column("at")
        #expect(result.rows.count == 3)
        #expect(try result.rows.map { try $0.optionalInt(id) } == [1, 2, nil])
        #expect(try result.rows.map { try $0.optionalString(note) } == ["ünïcödé ✓ 日本語 🎉", "", nil])
        #expect(try result.rows[0].date(at) == Date(timeIntervalSince1970: 1_795_310_400))
        #expect(try result.rows[1].optionalDate(at) == nil && result.rows[2].date(at) == .distantFuture)
        #expect(try result.rows.map { try $0.optionalBool("flag") } == [true, false, nil])
        #expect(result.rows[1]["note"] == "" && result.rows[2]["note"] == nil && result.rows[0]["nothing"] == nil)
        #expect(result.rows[1].values == ["2", "", nil, "f"])
    }

    @Test func errorsNameTheColumn() throws {
        let result = Self.result(["quantity", "purchase_date", "missing_value"], [["many", "yesterday", nil]])
        let row = try #require(result.rows.first)
        func message(_ body: () throws -> Any) -> String? {
            do { _ = try body(); return nil } catch { return (error as? PostgresError).flatMap { $0.kind == .decoding ? $0.message : nil } }
        }
        let quantity = try result.column("quantity"), date = try result.column("purchase_date"), missing = try result.column("missing_value")
        #expect(message { try row.int(quantity) } == #"column "quantity" is not an integer"#)
        #expect(message { try row.int("quantity") } == #"column "quantity" is not an integer"#)
        #expect(message { try row.optionalDate(date) as Any } == #"column "purchase_date" is not a timestamp"#)
        #expect(message { try row.string(missing) } == #"column "missing_value" is NULL"#)
        #expect(message { try row.bool("missing_value") } == #"column "missing_value" is NULL"#)
        #expect(message { try result.column("no_such_column") } == #"the result has no column "no_such_column""#)
        #expect(message { try row.uuid("no_such_column") } == #"the result has no column "no_such_column""#)
    }

    @Test func aResultWithoutRowsStillResolvesItsColumns() throws {
        let result = Self.result(["a", "b"], [])
        #expect(result.rows.isEmpty)
        #expect(throws: Never.self) { try result.column("b") }
    }

    // MARK: - Through PostgreSQL

    @Test @Loop func manyRowsOfEveryKindCopyOutOfLibpq() async throws {
        let connection = try await PostgresConnection.connect(try TestDatabase.url(), timeoutMs: 5_000)
        defer { connection.close() }
        let result = try await connection.query("""
            SELECT i, CASE WHEN i % 3 = 0 THEN NULL WHEN i % 3 = 1 THEN '' ELSE repeat('ü', i) END AS text,
                   i % 2 = 0 AS even, timestamptz '2026-11-22 01:20:00+00' + i * interval '1 second' AS at,
                   'same' AS "Mixed Case", 'x' AS i
              FROM generate_series(1, 5000) AS i
            """, [])
        #expect(result.rows.count == 5000 && result.affectedRows == 5000 && result.command == "SELECT 5000")
        let i = try result.column("i"), text = try result.column("text"), at = try result.column("at")
        for (index, row) in result.rows.enumerated() {
            let n = index + 1
            #expect(try row.int(i) == n)
            #expect(try row.optionalString(text) == (n % 3 == 0 ? nil : n % 3 == 1 ? "" : String(repeating: "ü", count: n)))
            #expect(try row.bool("even") == (n % 2 == 0))
            #expect(try row.date(at) == Date(timeIntervalSince1970: 1_795_310_400 + Double(n)))
            #expect(row["Mixed Case"] == "same")
        }
        #expect(throws: PostgresError.self) { try result.column("mixed case") }
    }
}
