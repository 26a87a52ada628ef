import Foundation

/// One SQL statement and its parameters, for requests that send several statements in one round trip
/// (`PostgresConnection.pipeline`, `PostgresPool.transaction(_:)`).
public struct PostgresStatement: Sendable {
    /// One SQL statement with `$1`, `$2`… placeholders.
    public let sql: String
    /// The values bound to the placeholders, in order.
    public let parameters: [any PostgresEncodable]

    /// A statement and its parameters.
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
        guard !sql.containsNULByte else {
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
            if let text, text.containsNULByte {
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

extension String {
    /// True when the UTF-8 form holds a NUL byte, which would end the C string libpq reads early.
    var containsNULByte: Bool {
        var text = self
        return text.withUTF8 { bytes in
            guard let start = bytes.baseAddress, !bytes.isEmpty else { return false }
            return memchr(start, 0, bytes.count) != nil
        }
    }
}

/// A parameter encoded once, for a value bound in several statements of one round trip (the same list of
/// user IDs in each statement of a pipeline): its text is computed when it is made, not per statement.
public struct PostgresPreencoded<Value: PostgresEncodable>: PostgresEncodable {
    /// The wrapped value's type OID.
    public static var postgresTypeOID: UInt32 { Value.postgresTypeOID }
    private let text: String?

    /// `value`, encoded now.
    public init(_ value: Value) {
        text = value.postgresText()
    }

    /// The text computed at `init`, not recomputed per statement.
    public func postgresText() -> String? { text }
}
