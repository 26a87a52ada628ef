import ServiceRuntime
import EntitlementModel
import Foundation

/// The `grants` table: entitlements admins gave users by hand, and their revocations.
///
/// Times are kept in whole seconds (floored), so the `created_at` and `revoked_at` a client reads back are
/// exactly the instants the evaluator uses: asking for the entitlements `at` a grant's `created_at` sees it.
@Loop
struct GrantStore {
    /// `date` floored to a whole second.
    nonisolated static func wholeSecond(_ date: Date) -> Date {
        Date(timeIntervalSinceReferenceDate: date.timeIntervalSinceReferenceDate.rounded(.down))
    }

    /// Stores grant `id` of `entitlement` to `userID`, made by `actor` at `now` (floored to a whole second);
    /// returns it as stored.
    func create(id: UUID, userID: String, entitlement: String, expiresAt: Date?, reason: String, actor: String, now: Date,
                on db: some PostgresQueryable) async throws -> GrantRecord {
        let record = GrantRecord(
            grant: Grant(id: id.lowercasedString, userID: userID, entitlement: entitlement,
                         createdAt: Self.wholeSecond(now), expiresAt: expiresAt, reason: reason),
            createdBy: actor, revokedBy: nil)
        _ = try await db.query("""
            INSERT INTO grants (grant_id, user_id, entitlement, expires_at, reason, created_by, created_at)
            VALUES ($1, $2, $3, $4, $5, $6, $7)
            """, [id, userID, entitlement, expiresAt, reason, actor, record.grant.createdAt])
        return record
    }

    /// Grant `id`, locked until the caller's transaction ends; nil when there is no such grant.
    func lockedRecord(id: UUID, on db: some PostgresQueryable) async throws -> GrantRecord? {
        try Self.records(try await db.query("""
            SELECT grant_id, user_id, entitlement, created_at, expires_at, revoked_at, reason, created_by, revoked_by
              FROM grants WHERE grant_id = $1 FOR UPDATE
            """, [id])).first
    }

    /// Marks grant `id` revoked at `revokedAt` by `actor`.
    func revoke(id: UUID, at revokedAt: Date, by actor: String, on db: some PostgresQueryable) async throws {
        _ = try await db.query("UPDATE grants SET revoked_at = $2, revoked_by = $3 WHERE grant_id = $1", [id, revokedAt, actor])
    }

    /// Every grant `userID` was given, revoked and ended ones included, newest first (given in one second: the one
    /// given last first), with who gave and revoked it.
    func records(userID: String, on db: some PostgresQueryable) async throws -> [GrantRecord] {
        try Self.records(try await db.query("""
            SELECT grant_id, user_id, entitlement, created_at, expires_at, revoked_at, reason, created_by, revoked_by
              FROM grants WHERE user_id = $1 ORDER BY created_at DESC, given_order DESC
            """, [userID]))
    }

    private static func records(_ result: PostgresResult) throws -> [GrantRecord] {
        let createdBy = try result.column("created_by"), revokedBy = try result.column("revoked_by")
        return try zip(grants(result), result.rows).map { grant, row in
            GrantRecord(grant: grant, createdBy: try row.string(createdBy), revokedBy: try row.optionalString(revokedBy))
        }
    }

    /// The rows of `grants` as the model's `Grant`s, each column looked up once for all rows (also read by
    /// ``UserSnapshotStore``).
    static func grants(_ result: PostgresResult) throws -> [Grant] {
        let id = try result.column("grant_id"), userID = try result.column("user_id"), entitlement = try result.column("entitlement"),
            createdAt = try result.column("created_at"), expiresAt = try result.column("expires_at"),
            revokedAt = try result.column("revoked_at"), reason = try result.column("reason")
        return try result.rows.map { row in
            Grant(id: try row.string(id), userID: try row.string(userID), entitlement: try row.string(entitlement),
                  createdAt: try row.date(createdAt), expiresAt: try row.optionalDate(expiresAt),
                  revokedAt: try row.optionalDate(revokedAt), reason: try row.string(reason))
        }
    }
}
