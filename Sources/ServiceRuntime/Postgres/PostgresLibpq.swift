import CPostgres
import Foundation

/// Conversions from libpq's C values into Swift ones: results, errors and notices.
enum PostgresLibpq {
    /// `PG_DIAG_*` field codes of `PQresultErrorField`.
    private enum Field {
        static let severity = code("V")
        static let sqlState = code("C")
        static let message = code("M")
        static let detail = code("D")
        static let hint = code("H")
        static let constraint = code("n")
        private static func code(_ c: Unicode.Scalar) -> Int32 { Int32(UInt8(ascii: c)) }
    }

    /// Copies a `PGRES_TUPLES_OK` / `PGRES_COMMAND_OK` result out of libpq's memory, in one buffer.
    static func result(_ result: OpaquePointer) -> PostgresResult {
        let storage = PostgresResultStorage(
            columnCount: Int(PQnfields(result)), rowCount: Int(PQntuples(result)),
            name: { column in bytes(PQfname(result, Int32(column))) },
            value: { row, column in
                PQgetisnull(result, Int32(row), Int32(column)) != 0 ? nil
                    : UnsafeBufferPointer(start: UnsafeRawPointer(PQgetvalue(result, Int32(row), Int32(column)))
                        .assumingMemoryBound(to: UInt8.self), count: Int(PQgetlength(result, Int32(row), Int32(column))))
            })
        return PostgresResult(storage, affectedRows: count(PQcmdTuples(result)), command: String(cString: PQcmdStatus(result)))
    }

    /// A C string's bytes, without its NUL.
    private static func bytes(_ text: UnsafePointer<CChar>) -> UnsafeBufferPointer<UInt8> {
        UnsafeBufferPointer(start: UnsafeRawPointer(text).assumingMemoryBound(to: UInt8.self), count: strlen(text))
    }

    /// The number `PQcmdTuples` wrote, 0 for its empty string (a command without a count).
    private static func count(_ text: UnsafePointer<CChar>) -> Int {
        Int(postgresBytes: bytes(text)) ?? 0
    }

    /// The error an error result carries. Errors libpq made up itself (no SQLSTATE) on a connection that is no
    /// longer good are connection failures.
    static func error(_ result: OpaquePointer, connectionBroken: Bool) -> PostgresError {
        func field(_ code: Int32) -> String? {
            PQresultErrorField(result, code).map { String(cString: $0) }
        }
        let sqlState = field(Field.sqlState)
        let message = field(Field.message) ?? trimmed(String(cString: PQresultErrorMessage(result)))
        return PostgresError(
            kind: sqlState == nil && connectionBroken ? .connection : .server,
            message: message.isEmpty ? "the server reported an error without a message" : message,
            sqlState: sqlState,
            detail: field(Field.detail),
            hint: field(Field.hint),
            constraint: field(Field.constraint))
    }

    /// The connection's last error (`PQerrorMessage`) as a connection failure.
    static func connectionError(_ connection: OpaquePointer?, fallback: String) -> PostgresError {
        let message = connection.map { trimmed(String(cString: PQerrorMessage($0))) } ?? ""
        return PostgresError(kind: .connection, message: message.isEmpty ? fallback : message)
    }

    /// Writes server notices and warnings to the log instead of libpq's default, standard error.
    static let noticeReceiver: PQnoticeReceiver = { _, result in
        guard let result else { return }
        func field(_ code: Int32) -> String? {
            PQresultErrorField(result, code).map { String(cString: $0) }
        }
        let severity = field(Field.severity) ?? "NOTICE"
        let fields: KeyValuePairs<String, CustomStringConvertible?> = [
            "severity": severity, "sqlstate": field(Field.sqlState), "message": field(Field.message),
        ]
        switch severity {
        case "WARNING", "ERROR", "FATAL", "PANIC": Log.warning("postgres_notice", fields)
        default: Log.debug("postgres_notice", fields)
        }
    }

    /// libpq messages end with a newline and may span lines; the log wants one line.
    static func trimmed(_ message: String) -> String {
        message.split(whereSeparator: \.isNewline).map { $0.trimmingCharacters(in: .whitespaces) }.joined(separator: " ")
    }
}
