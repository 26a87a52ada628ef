import Foundation
import Testing
@testable import AppStore
@testable import EntitlementService
@testable import FakeAppStore
@testable import ServiceRuntime
import Timestamps

/// Parameter encoding and value decoding that need no server.
@Suite struct PostgresCodingTests {
    /// 2026-11-22T01:20:00Z
    let instant = Date(timeIntervalSince1970: 1_795_310_400)

    @Test(arguments: [
        ("2026-11-22 01:20:00+00", 0.0),
        ("2026-11-22 01:20:00.123+00", 0.123),
        ("2026-11-22 01:20:00.123456+00", 0.123456),
        ("2026-11-22 02:20:00+01", 0.0),
        ("2026-11-22 06:50:00+05:30", 0.0),
        ("2026-11-21 20:20:00-05", 0.0),
        ("2026-11-22 01:20:00", 0.0),
        ("2026-11-22T01:20:00Z", 0.0),
        ("2026-11-22T01:20:00.5Z", 0.5),
        ("2026-11-22T03:20:00+02:00", 0.0),
    ])
    func parsesServerAndRFC3339Timestamps(text: String, fraction: Double) throws {
        let parsed = try #require(RFC3339.date(from: text, dialect: .postgreSQL))
        #expect(abs(parsed.timeIntervalSince1970 - (instant.timeIntervalSince1970 + fraction)) < 0.000_001)
    }

    @Test func parsesDatesOffsetsWithSecondsEraAndInfinity() throws {
        #expect(RFC3339.date(from: "2026-11-22", dialect: .postgreSQL) == Date(timeIntervalSince1970: 1_795_305_600))
        // Local mean time offsets have seconds: 00:00:00+00:53:28 is 23:06:32 UTC the day before.
        let lmt = try #require(RFC3339.date(from: "1890-01-01 00:00:00+00:53:28", dialect: .postgreSQL))
        #expect(RFC3339.string(from: lmt, dialect: .postgreSQL) == "1889-12-31T23:06:32.000Z")
        let bc = try #require(RFC3339.date(from: "0044-03-15 12:00:00+00 BC", dialect: .postgreSQL))
        #expect(RFC3339.string(from: bc, dialect: .postgreSQL) == "0044-03-15T12:00:00.000Z BC")
        #expect(RFC3339.date(from: "infinity", dialect: .postgreSQL) == .distantFuture)
        #expect(RFC3339.date(from: "-infinity", dialect: .postgreSQL) == .distantPast)
    }

    @Test(arguments: ["", "2026-11-22 01:20", "2026-13-01 00:00:00+00", "2026-11-22 01:20:00+", "2026-11-22x", "yesterday", "2026-11-22 01:20:00.+00"])
    func rejectsWhatIsNotATimestamp(text: String) {
        #expect(RFC3339.date(from: text, dialect: .postgreSQL) == nil)
    }

    @Test func formatsRFC3339WithMillisecondsInUTC() {
        #expect(RFC3339.string(from: instant, dialect: .postgreSQL) == "2026-11-22T01:20:00.000Z")
        #expect(RFC3339.string(from: instant.addingTimeInterval(0.1239), dialect: .postgreSQL) == "2026-11-22T01:20:00.123Z")
        #expect(RFC3339.string(from: Date(timeIntervalSince1970: -0.5), dialect: .postgreSQL) == "1969-12-31T23:59:59.500Z")
        #expect(RFC3339.string(from: Date(timeIntervalSince1970: 951_782_400), dialect: .postgreSQL) == "2000-02-29T00:00:00.000Z")
    }

    @Test func byteaUsesHexBothWays() {
        let bytes: [UInt8] = [0, 1, 0x7f, 0x80, 0xfe, 0xff]
        #expect(PostgresBytea.hex(bytes) == "\\x00017f80feff")
        #expect(PostgresBytea.decode("\\x00017F80feff") == bytes)
        #expect(PostgresBytea.decode("\\x") == [])
        #expect(PostgresBytea.decode("\\x0") == nil)
        #expect(PostgresBytea.decode("\\xzz") == nil)
        #expect(PostgresBytea.decode("00") == nil)
    }

    @Test func parametersCarryTypeAndTextNullIncluded() throws {
        let statement = try EncodedStatement("SELECT $1, $2, $3, $4, $5, $6", [
            "text", 42, Int32(7), true, Double.infinity, Int?.none,
        ])
        #expect(statement.types == [0, 20, 23, 16, 701, 20])
        #expect(statement.values == ["text", "42", "7", "true", "Infinity", nil])
        #expect(UUID(uuidString: "6BA7B810-9DAD-11D1-80B4-00C04FD430C8")!.postgresText() == "6ba7b810-9dad-11d1-80b4-00c04fd430c8")
        #expect(PostgresJSON(#"{"a":1}"#).postgresText() == #"{"a":1}"#)
    }

    @Test func nulBytesAreRefusedNotTruncated() {
        #expect {
            try EncodedStatement("SELECT $1, $2", ["fine", "bad\u{0}tail"])
        } throws: { error in
            guard let error = error as? PostgresError else { return false }
            return error.kind == .invalidParameter && error.message.contains("$2") && error.message.contains("NUL")
        }
        #expect(throws: PostgresError.self) { try EncodedStatement("SELECT 1\u{0}", []) }
    }

    @Test func errorClassification() {
        let unique = PostgresError(kind: .server, message: "duplicate key", sqlState: "23505")
        #expect(unique.isUniqueViolation && !unique.isConnectionFailure && !unique.isTimeout)
        #expect(PostgresError(kind: .server, message: "", sqlState: "40001").isSerializationFailure)
        #expect(PostgresError(kind: .server, message: "", sqlState: "08006").isConnectionFailure)
        #expect(PostgresError(kind: .server, message: "", sqlState: "57P01").isConnectionFailure)
        #expect(PostgresError(kind: .connection, message: "gone").isConnectionFailure)
        #expect(PostgresError(kind: .server, message: "", sqlState: "57014").isTimeout)
        #expect(PostgresError(kind: .timeout, message: "").isTimeout)
    }
}
