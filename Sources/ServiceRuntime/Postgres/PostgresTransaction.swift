/// The isolation level a transaction starts with.
public enum PostgresIsolationLevel: Sendable {
    case readCommitted, repeatableRead, serializable

    var beginStatement: String {
        switch self {
        case .readCommitted: "BEGIN"
        case .repeatableRead: "BEGIN ISOLATION LEVEL REPEATABLE READ"
        case .serializable: "BEGIN ISOLATION LEVEL SERIALIZABLE"
        }
    }

    /// The BEGIN of a read-only transaction (literals: the connection finds statements it prepared by text).
    var readOnlyBeginStatement: String {
        switch self {
        case .readCommitted: "BEGIN READ ONLY"
        case .repeatableRead: "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"
        case .serializable: "BEGIN ISOLATION LEVEL SERIALIZABLE READ ONLY"
        }
    }
}

extension PostgresPool {
    /// Runs `body` inside BEGIN … COMMIT on one connection; any error from `body` or from COMMIT rolls the
    /// transaction back and is rethrown. Serialization failures are not retried here: check
    /// `PostgresError.isSerializationFailure` and run the whole transaction again.
    public func transaction<T>(
        isolation: PostgresIsolationLevel = .readCommitted,
        _ body: @Loop (PostgresConnection) async throws -> T
    ) async throws -> T {
        try await withConnection { connection in
            _ = try await connection.query(isolation.beginStatement)
            do {
                let value = try await body(connection)
                try await Self.commit(connection)
                return value
            } catch {
                await Self.rollBack(connection)
                throw error
            }
        }
    }

    /// Runs statements known up front as one transaction in a single round trip: BEGIN, the statements and
    /// COMMIT go out together in pipeline mode. Returns one result per statement; the first failure rolls
    /// everything back and is thrown.
    public func transaction(
        _ statements: [PostgresStatement],
        isolation: PostgresIsolationLevel = .readCommitted
    ) async throws -> [PostgresResult] {
        try await withConnection { connection in
            var batch = [PostgresStatement(isolation.beginStatement)]
            batch.reserveCapacity(statements.count + 2)
            batch += statements
            batch.append(PostgresStatement("COMMIT"))
            do {
                let results = try await connection.pipeline(batch)
                return Array(results.dropFirst().dropLast())
            } catch {
                await Self.rollBack(connection)
                throw error
            }
        }
    }

    /// Runs read-only statements known up front as one transaction (BEGIN … READ ONLY, the statements, COMMIT)
    /// in a single round trip and returns one result per statement. While every connection is busy, reads of
    /// one isolation waiting together go out in one round trip as one read-only transaction, whose snapshot is
    /// taken after all of them were asked for; the server refuses any write in them, and a failure runs each
    /// again on its own.
    public func readTransaction(
        _ statements: [PostgresStatement],
        isolation: PostgresIsolationLevel = .readCommitted
    ) async throws -> [PostgresResult] {
        try await run(QueuedRead(statements: statements, isolation: isolation))
    }

    /// COMMIT, refusing the silent case where the server answers ROLLBACK because the transaction had
    /// already failed (a statement error that `body` caught and ignored).
    private static func commit(_ connection: PostgresConnection) async throws {
        let result = try await connection.query("COMMIT")
        guard result.command == "COMMIT" else {
            throw PostgresError(kind: .server, message: "the transaction was rolled back because a statement in it had failed", sqlState: "25P02")
        }
    }

}
