import ServiceRuntime
import EntitlementModel
import Foundation

/// Grants made and revoked by admins, each change audited in the same transaction as the change.
///
/// Times are kept in whole seconds (floored), so the `created_at` and `revoked_at` a client reads back are
/// exactly the instants the evaluator uses: asking for the entitlements `at` a grant's `created_at` sees it.
@Loop
struct GrantStore {
    let db: PostgresPool

    private static let columns = """
        grant_id::text AS grant_id, user_id, entitlement, created_at, expires_at, revoked_at, reason, created_by, revoked_by
        """

    /// `date` floored to a whole second.
    nonisolated static func wholeSecond(_ date: Date) -> Date {
        Date(timeIntervalSinceReferenceDate: date.timeIntervalSinceReferenceDate.rounded(.down))
    }

    /// Records a new grant by `actor` and its `grant.create` audit event; returns the grant.
    func create(userID: String, entitlement: String, expiresAt: Date?, reason: String, actor: String, now: Date) async throws -> GrantRecord {
        let record = GrantRecord(
            grant: Grant(id: UUID().uuidString.lowercased(), userID: userID, entitlement: entitlement,
                         createdAt: Self.wholeSecond(now), expiresAt: expiresAt, reason: reason),
            createdBy: actor, revokedBy: nil)
        _ = try await db.transaction([
            PostgresStatement("""
                INSERT INTO grants (grant_id, user_id, entitlement, expires_at, reason, created_by, created_at)
                VALUES ($1::uuid, $2, $3, $4, $5, $6, $7)
                """, [record.grant.id, userID, entitlement, expiresAt, reason, actor, record.grant.createdAt]),
            AuditLog.record(actor: actor, action: AuditLog.Action.grantCreate, subject: record.grant.id, userID: userID,
                            before: nil, after: try PostgresJSON(encoding: record)),
        ])
        return record
    }

    /// Revokes grant `id` as `actor` at `now`, auditing it; a grant revoked before is answered as it stands
    /// (revoking is idempotent and audited once). Nil when there is no such grant.
    func revoke(id: String, actor: String, now: Date) async throws -> GrantRecord? {
        try await db.transaction { connection in
            let found = try await connection.query(
                "SELECT \(Self.columns) FROM grants WHERE grant_id = $1::uuid FOR UPDATE", [id]).rows
            guard let row = found.first else { return nil }
            let before = try GrantRecord(row: row)
            guard before.grant.revokedAt == nil else { return before }
            var after = before
            after.grant.revokedAt = max(Self.wholeSecond(now), before.grant.createdAt)
            after.revokedBy = actor
            _ = try await connection.query("UPDATE grants SET revoked_at = $2, revoked_by = $3 WHERE grant_id = $1::uuid",
                                           [id, after.grant.revokedAt, actor])
            let audit = AuditLog.record(actor: actor, action: AuditLog.Action.grantRevoke, subject: id, userID: before.grant.userID,
                                        before: try PostgresJSON(encoding: before), after: try PostgresJSON(encoding: after))
            _ = try await connection.query(audit.sql, audit.parameters)
            return after
        }
    }
}

/// A grant as the admin API shows it: the model's grant document plus who created and revoked it (key ids).
struct GrantRecord: Encodable, Equatable {
    var grant: Grant
    var createdBy: String
    var revokedBy: String?

    init(grant: Grant, createdBy: String, revokedBy: String?) {
        self.grant = grant
        self.createdBy = createdBy
        self.revokedBy = revokedBy
    }

    init(row: PostgresRow) throws {
        grant = try GrantRows.grant(row)
        createdBy = try row.string("created_by")
        revokedBy = try row.optionalString("revoked_by")
    }

    enum CodingKeys: String, CodingKey { case createdBy = "created_by", revokedBy = "revoked_by" }

    func encode(to encoder: any Encoder) throws {
        try grant.encode(to: encoder)
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(createdBy, forKey: .createdBy)
        try container.encode(revokedBy, forKey: .revokedBy)
    }
}
