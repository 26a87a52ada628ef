import ServiceRuntime
import EntitlementModel
import Foundation

/// Reads what a user owns: their transactions, renewal state, grants and balances (one snapshot), evaluated by
/// the model's pure `EntitlementEvaluator` at one instant.
@Loop
struct EntitlementReader {
    let db: PostgresPool
    let catalog: CatalogCache

    /// The body of `GET /v1/users/{user_id}/entitlements` at `at`.
    func document(userID: String, at: Date) async throws -> EntitlementsDocument {
        let catalog = try await catalog.current()
        let snapshot = try await UserSnapshotStore().snapshot(of: userID, on: db)
        return EntitlementsDocument(userID: userID, report: snapshot.report(catalog: catalog, at: at), consumables: snapshot.balances)
    }
}

/// The `grants` table's rows as the model's `Grant`.
enum GrantRows {
    static func grant(_ row: PostgresRow) throws -> Grant {
        Grant(
            id: try row.string("grant_id"), userID: try row.string("user_id"),
            entitlement: try row.string("entitlement"), createdAt: try row.date("created_at"),
            expiresAt: try row.optionalDate("expires_at"), revokedAt: try row.optionalDate("revoked_at"),
            reason: try row.string("reason"))
    }
}
