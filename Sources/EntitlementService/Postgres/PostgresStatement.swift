/// One SQL statement and its parameters, for requests that send several statements in one round trip
/// (`PostgresConnection.pipeline`, `PostgresPool.transaction(_:)`).
public struct PostgresStatement: Sendable {
    public let sql: String
    public let parameters: [any PostgresEncodable]

    public init(_ sql: String, _ parameters: [any PostgresEncodable] = []) {
        self.sql = sql
        self.parameters = parameters
    }
}

/// A statement checked and converted for libpq: the SQL text, each parameter's type OID and text.
struct EncodedStatement: Sendable {
    /// The protocol's limit on parameters per statement.
    static let maximumParameters = 65_535

    let sql: String
    let types: [UInt32]
    let values: [String?]

    /// Refuses what libpq would silently mangle: C strings end at NUL, so a NUL byte in the SQL text or in a
    /// parameter would truncate it rather than fail.
    init(_ sql: String, _ parameters: [any PostgresEncodable]) throws {
        guard !sql.utf8.contains(0) else {
            throw PostgresError(kind: .invalidParameter, message: "the SQL text contains a NUL byte")
        }
        guard parameters.count <= Self.maximumParameters else {
            throw PostgresError(kind: .invalidParameter, message: "\(parameters.count) parameters exceed the limit of \(Self.maximumParameters)")
        }
        var types: [UInt32] = []
        var values: [String?] = []
        types.reserveCapacity(parameters.count)
        values.reserveCapacity(parameters.count)
        for (i, parameter) in parameters.enumerated() {
            let text = parameter.postgresText()
            if let text, text.utf8.contains(0) {
                throw PostgresError(
                    kind: .invalidParameter,
                    message: "parameter $\(i + 1) contains a NUL byte, which PostgreSQL text cannot hold; send binary data as [UInt8] or Data")
            }
            types.append(type(of: parameter).postgresTypeOID)
            values.append(text)
        }
        self.sql = sql
        self.types = types
        self.values = values
    }

    init(_ statement: PostgresStatement) throws {
        try self.init(statement.sql, statement.parameters)
    }
}
