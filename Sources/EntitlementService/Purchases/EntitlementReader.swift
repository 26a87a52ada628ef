import ServiceRuntime
import EntitlementModel
import Foundation

/// Reads what a user owns: their transactions, renewal state, grants and balances (one snapshot), evaluated by
/// the model's pure `EntitlementEvaluator` at one instant.
@Loop
struct EntitlementReader {
    let snapshots: UserSnapshotLoader
    let catalog: CatalogCache

    /// The body of `GET /v1/users/{user_id}/entitlements` at `at`.
    func document(userID: String, at: Date) async throws -> EntitlementsDocument {
        try await evaluation(userID: userID, at: at).document
    }

    /// The body at `at`, and the instant from which time alone may change it (the report's `nextChange`).
    func evaluation(userID: String, at: Date) async throws -> (document: EntitlementsDocument, nextChange: Date?) {
        let catalog = try await catalog.current()
        let snapshot = try await snapshots.snapshot(of: userID)
        let report = snapshot.report(catalog: catalog, at: at)
        return (EntitlementsDocument(userID: userID, report: report, consumables: snapshot.balances), report.nextChange)
    }
}
