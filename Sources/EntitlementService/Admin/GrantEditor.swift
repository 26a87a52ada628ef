import ServiceRuntime
import EntitlementModel
import Foundation

/// Grants made and revoked through the admin API, each change audited, and its webhook event written, in the
/// same transaction as the change.
@Loop
struct GrantEditor {
    let db: PostgresPool
    let events: EventRecorder
    private let grants = GrantStore()
    private let audit = AuditStore()

    init(db: PostgresPool, events: EventRecorder) {
        self.db = db
        self.events = events
    }

    /// Records a new grant by `actor` and its `grant.create` audit event; returns the grant.
    func create(userID: String, entitlement: String, expiresAt: Date?, reason: String, actor: String, now: Date) async throws -> GrantRecord {
        return try await db.transaction { connection in
            let watch = try await events.watch([userID], on: connection)
            let record = try await grants.create(id: UUID(), userID: userID, entitlement: entitlement, expiresAt: expiresAt,
                                                 reason: reason, actor: actor, now: now, on: connection)
            try await audit.record(actor: actor, action: .grantCreate, subject: record.grant.id, userID: userID,
                                   before: nil, after: try PostgresJSON(encoding: record), on: connection)
            try await events.finish(watch, cause: { _ in .grant(id: record.grant.id) }, on: connection)
            return record
        }
    }

    /// Revokes the grant whose `grant_id` is `id` as `actor` at `now`, auditing it; a grant revoked before is
    /// answered as it stands (revoking is idempotent and audited once). Nil when there is no such grant.
    func revoke(id: UUID, actor: String, now: Date) async throws -> GrantRecord? {
        return try await db.transaction { connection in
            guard let before = try await grants.lockedRecord(id: id, on: connection) else { return nil }
            guard before.grant.revokedAt == nil else { return before }
            let watch = try await events.watch([before.grant.userID], on: connection)
            let revokedAt = max(GrantStore.wholeSecond(now), before.grant.createdAt)
            var after = before
            after.grant.revokedAt = revokedAt
            after.revokedBy = actor
            try await grants.revoke(id: id, at: revokedAt, by: actor, on: connection)
            try await audit.record(actor: actor, action: .grantRevoke, subject: before.grant.id, userID: before.grant.userID,
                                   before: try PostgresJSON(encoding: before), after: try PostgresJSON(encoding: after), on: connection)
            try await events.finish(watch, cause: { _ in .grantRevoked(id: before.grant.id) }, on: connection)
            return after
        }
    }
}
