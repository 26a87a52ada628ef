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

    /// Copies a `PGRES_TUPLES_OK` / `PGRES_COMMAND_OK` result out of libpq's memory.
    static func result(_ result: OpaquePointer) -> PostgresResult {
        let fieldCount = PQnfields(result)
        let rowCount = PQntuples(result)
        let columns = (0..<fieldCount).map { i in
            PostgresColumn(name: String(cString: PQfname(result, i)), typeOID: PQftype(result, i))
        }
        let index = PostgresColumnIndex(columns)
        var rows: [PostgresRow] = []
        rows.reserveCapacity(Int(rowCount))
        for row in 0..<rowCount {
            let values: [String?] = (0..<fieldCount).map { field in
                PQgetisnull(result, row, field) != 0 ? nil : String(cString: PQgetvalue(result, row, field))
            }
            rows.append(PostgresRow(index: index, values: values))
        }
        return PostgresResult(
            rows: rows,
            affectedRows: Int(String(cString: PQcmdTuples(result))) ?? 0,
            columns: columns,
            command: String(cString: PQcmdStatus(result)))
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
