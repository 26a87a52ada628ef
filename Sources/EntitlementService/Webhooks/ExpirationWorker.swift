import ServiceRuntime
import Foundation

/// Turns "an active entitlement's end passed" into its event without any message from Apple: claims users whose
/// stored next change is due (`FOR UPDATE SKIP LOCKED`, so instances share them and each is taken once),
/// evaluates them now and writes the `expiration` when what they hold changed (a `catalog_change` for heads a
/// catalog change marked), and stores their next change.
@Loop
enum ExpirationWorker {
    static let batchSize = 100

    static func make(db: PostgresPool, events: EventRecorder, intervalMs: UInt64) -> PeriodicWorker {
        // A failing run (PostgreSQL down) is logged by the worker once per outage, not every 500 ms.
        PeriodicWorker(name: "expirations", intervalMs: intervalMs) {
            let taken = try await db.transaction { try await events.catchUp(limit: batchSize, now: Date(), on: $0) }
            return taken == batchSize
        }
    }
}
