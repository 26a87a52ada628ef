/// Something a statement can run on: the pool (any free connection, autocommit) or one connection (inside a
/// transaction the caller holds). Stores take it, so one store method serves both.
@Loop
public protocol PostgresQueryable: AnyObject {
    /// Runs `sql` with `parameters` bound as `$1`, `$2`…; returns all rows.
    func query(_ sql: String, _ parameters: [any PostgresEncodable]) async throws -> PostgresResult
}

extension PostgresPool: PostgresQueryable {}
extension PostgresConnection: PostgresQueryable {}
