import Foundation
import Testing
@testable import ServiceRuntime

/// Arrays and intervals as parameters, and arrays read back: the text format without a server, then every
/// element type through PostgreSQL and back.
@Suite struct PostgresArrayTests {
    /// Strings that break naive array literals: separators, braces, quotes, backslashes, the word NULL,
    /// blanks, unicode.
    static let hostile = [
        "plain", "", " ", "a,b", "{braces}", "\"quoted\"", #"back\slash"#, #"\""#, #"\\"#, "NULL", "null",
        "ünïcödé ✓ 日本語 🎉", "line\nbreak\ttab", "'single'", "trailing\\",
    ]

    @Test func everyElementIsQuotedAndEscaped() {
        #expect(["a", "b c"].postgresText() == #"{"a","b c"}"#)
        #expect(["say \"hi\"", #"C:\dir"#].postgresText() == #"{"say \"hi\"","C:\\dir"}"#)
        #expect(["NULL"].postgresText() == #"{"NULL"}"#, "the word NULL stays data")
        #expect(["ü ✓ 🎉"].postgresText() == #"{"ü ✓ 🎉"}"#)
        #expect([1, -2, Int.max].postgresText() == #"{"1","-2","9223372036854775807"}"#)
        #expect([true, false].postgresText() == #"{"true","false"}"#)
    }

    @Test func nilElementsAreNullAndEmptyArraysAreBraces() {
        #expect(["a", nil, ""].postgresText() == #"{"a",NULL,""}"#)
        #expect([Int?.none].postgresText() == "{NULL}")
        #expect([String]().postgresText() == "{}")
        #expect([UUID?]().postgresText() == "{}")
    }

    @Test func arraysAreDeclaredWithTheirArrayType() throws {
        let statement = try EncodedStatement("SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11", [
            ["a"], [UUID()], [1], [Int64(1)], [Int32(1)], [true], [Date()], [String?.none], [1.5], [UInt8(1)], [UInt8?.some(1)],
        ])
        #expect(statement.types == [1009, 2951, 1016, 1016, 1007, 1000, 1185, 1009, 1022, 17, 1005])
        #expect(statement.values[9] == "\\x01", "[UInt8] stays bytea")
    }

    @Test func aPreencodedValueBindsAsTheValueItself() throws {
        let values: [any PostgresEncodable] = [Self.hostile, [UInt8(0), 255], [UUID?.none], Int?.none, Date(timeIntervalSince1970: 0)]
        let plain = try EncodedStatement("SELECT $1, $2, $3, $4, $5", values)
        let preencoded = try EncodedStatement("SELECT $1, $2, $3, $4, $5", [
            PostgresPreencoded(Self.hostile), PostgresPreencoded([UInt8(0), 255]), PostgresPreencoded([UUID?.none]),
            PostgresPreencoded(Int?.none), PostgresPreencoded(Date(timeIntervalSince1970: 0)),
        ])
        #expect(preencoded.types == plain.types && preencoded.values == plain.values)
        #expect(plain.types == [1009, 17, 2951, 20, 1184] && plain.values[3] == nil)
    }

    @Test func datesUUIDsAndDurationsUseTheServersInputForms() {
        let uuid = UUID(uuidString: "6BA7B810-9DAD-11D1-80B4-00C04FD430C8")!
        #expect([uuid].postgresText() == #"{"6ba7b810-9dad-11d1-80b4-00c04fd430c8"}"#)
        #expect([Date(timeIntervalSince1970: 1_795_310_400.5)].postgresText() == #"{"2026-11-22T01:20:00.500Z"}"#)
        #expect(Duration.milliseconds(1_500).postgresText() == "1 seconds 500000 microseconds")
        #expect(Duration.milliseconds(-1_500).postgresText() == "-1 seconds -500000 microseconds")
        #expect(Duration.seconds(0).postgresText() == "0 seconds 0 microseconds")
        #expect(type(of: Duration.seconds(1)).postgresTypeOID == 1186)
    }

    @Test func serverArrayTextIsRead() {
        #expect(PostgresArrayText.elements("{}") == [])
        #expect(PostgresArrayText.elements("{a,b}") == ["a", "b"])
        #expect(PostgresArrayText.elements(#"{"a b","c,d",NULL,"NULL",""}"#) == ["a b", "c,d", nil, "NULL", ""])
        #expect(PostgresArrayText.elements(#"{"say \"hi\"","C:\\dir"}"#) == ["say \"hi\"", #"C:\dir"#])
        #expect(PostgresArrayText.elements("[0:1]={x,y}") == ["x", "y"])
        #expect(PostgresArrayText.elements("{ü,日本}") == ["ü", "日本"])
    }

    @Test(arguments: ["", "a,b", "{a", "a}", "{{1,2},{3,4}}", #"{"open}"#, "{a\"b}", "[0:1]{x}"])
    func whatIsNotAOneDimensionalArrayIsRefused(text: String) {
        #expect(PostgresArrayText.elements(text) == nil)
    }

    @Test func literalsWeWriteReadBackUnchanged() {
        let values: [String?] = Self.hostile + [nil]
        #expect(PostgresArrayText.elements(values.postgresText()!) == values)
    }

    // MARK: - Through PostgreSQL

    @Loop func connect() async throws -> PostgresConnection {
        try await PostgresConnection.connect(try TestDatabase.url(), timeoutMs: 5_000)
    }

    @Test @Loop func everyElementTypeRoundTrips() async throws {
        let connection = try await connect()
        defer { connection.close() }
        let uuids = [UUID(), UUID()]
        let dates = [Date(timeIntervalSince1970: 1_795_310_400.123), Date(timeIntervalSince1970: -86_400.5)]
        let row = try #require(try await connection.query("""
            SELECT $1 AS texts, $2 AS uuids, $3 AS ints, $4 AS int64s, $5 AS int32s, $6 AS bools, $7 AS dates,
                   $8 AS optionals, $9 AS empty, $10 AS doubles, cardinality($1) AS count, $1 = ARRAY[\(Self.hostile.indices.map { "$\($0 + 11)::text" }.joined(separator: ", "))] AS same
            """, [Self.hostile, uuids, [1, -2, Int.max], [Int64.min], [Int32.max, Int32.min], [true, false], dates,
                  ["x", nil, "NULL"], [UUID](), [0.1, -2.5]] + Self.hostile).rows.first)
        #expect(try row.array("texts", of: String.self) == Self.hostile)
        #expect(try row.int("count") == Self.hostile.count)
        #expect(try row.bool("same"), "the server sees each element as the string bound one by one")
        #expect(try row.array("uuids", of: UUID.self) == uuids)
        #expect(try row.array("ints", of: Int.self) == [1, -2, Int.max])
        #expect(try row.array("int64s", of: Int64.self) == [Int64.min])
        #expect(try row.array("int32s", of: Int32.self) == [Int32.max, Int32.min])
        #expect(try row.array("bools", of: Bool.self) == [true, false])
        let readDates = try row.array("dates", of: Date.self)
        #expect(readDates.count == 2 && zip(readDates, dates).allSatisfy { abs($0.timeIntervalSince($1)) < 0.001 }, "milliseconds are sent")
        #expect(try row.array("optionals", of: String?.self) == ["x", nil, "NULL"])
        #expect(try row.array("empty", of: UUID.self) == [])
        #expect(try row.array("doubles", of: Double.self) == [0.1, -2.5])
        #expect(throws: PostgresError.self) { try row.array("optionals", of: String.self) }
        #expect(throws: PostgresError.self) { try row.array("texts", of: Int.self) }
        #expect(throws: PostgresError.self) { try row.array("count", of: Int.self) }
    }

    @Test @Loop func nullElementsOfEveryTypeArriveAsNull() async throws {
        let connection = try await connect()
        defer { connection.close() }
        let row = try #require(try await connection.query("""
            SELECT array_positions($1, NULL) AS a, array_positions($2, NULL) AS b, array_positions($3, NULL) AS c,
                   array_positions($4, NULL) AS d, $5::text[] IS NULL AS whole
            """, [[Date?.none, Date()], [UUID(), nil], [Int?.none], [Bool?.none, true, nil], [String]?.none]).rows.first)
        #expect(try row.array("a", of: Int.self) == [1])
        #expect(try row.array("b", of: Int.self) == [2])
        #expect(try row.array("c", of: Int.self) == [1])
        #expect(try row.array("d", of: Int.self) == [1, 3])
        #expect(try row.bool("whole"))
    }

    @Test @Loop func unnestTurnsParallelArraysIntoRows() async throws {
        let connection = try await connect()
        defer { connection.close() }
        let rows = try await connection.query("""
            SELECT * FROM unnest($1, $2, $3) AS x (name, at, amount) ORDER BY name
            """, [["b", "a"], [Date(timeIntervalSince1970: 0), nil], [Int?.none, 7]]).rows
        #expect(try rows.map { try $0.string("name") } == ["a", "b"])
        #expect(try rows[0].optionalDate("at") == nil && rows[0].int("amount") == 7)
        #expect(try rows[1].date("at") == Date(timeIntervalSince1970: 0) && rows[1].optionalInt("amount") == nil)
    }

    @Test @Loop func durationsBindAsIntervals() async throws {
        let connection = try await connect()
        defer { connection.close() }
        let row = try #require(try await connection.query("""
            SELECT extract(epoch FROM $1) = 1.5 AS a, extract(epoch FROM $2) = -90061.001 AS b,
                   (timestamptz '2026-11-22 01:20:00+00' + $3) = timestamptz '2026-11-22 01:20:05.25+00' AS added
            """, [Duration.milliseconds(1_500), Duration.milliseconds(-90_061_001), Duration.milliseconds(5_250)]).rows.first)
        #expect(try row.bool("a"))
        #expect(try row.bool("b"))
        #expect(try row.bool("added"))
    }
}
