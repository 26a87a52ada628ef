import ServiceRuntime
import EntitlementModel
import Foundation

/// The product catalog, kept in PostgreSQL and cached in memory for at most `maxAgeMs`, so every instance
/// sees an admin's change within that time without asking the database on every request. Writing transactions
/// ask for the catalog at the revision they hold (``catalog(atRevision:on:)``), never an older one.
@Loop
final class CatalogCache {
    private let db: PostgresPool
    private let maxAgeMs: UInt64
    private var cached: (catalog: Catalog, revision: Int64, loadedAt: UInt64)?
    private var loading: Task<(Catalog, Int64), any Error>?
    /// Bumped by `invalidate()`, so a load that began before an invalidation is not cached as current.
    private var generation = 0
    /// True while a write answered by a `WORKERS` copy of this process may not have reached it yet
    /// (``EntitlementCache/hasHeardEveryWrite(now:)``): the cached copy is then not served, so a catalog change
    /// answered by one copy is read at once on every other.
    var hasUnheardWrites: @Loop () -> Bool = { false }

    init(db: PostgresPool, maxAgeMs: UInt64 = 1_000) {
        self.db = db
        self.maxAgeMs = maxAgeMs
    }

    /// The catalog as of at most `maxAgeMs` ago; concurrent callers share one load.
    func current() async throws -> Catalog {
        let now = EventLoop.shared.now
        if let cached, now &- cached.loadedAt < maxAgeMs, !hasUnheardWrites() { return cached.catalog }
        if let loading { return try await loading.value.0 }
        let started = generation
        let task = Task.onLoop { try await self.load() }
        loading = task
        defer { loading = nil }
        let (catalog, revision) = try await task.value
        if generation == started { cached = (catalog, revision, EventLoop.shared.now) }
        return catalog
    }

    /// The catalog at `revision`, which the caller's transaction on `connection` holds
    /// (``ProductStore/holdCatalog(on:)``): the cached copy when it is that revision, else read on `connection`,
    /// and kept when newer than the cached one.
    func catalog(atRevision revision: Int64, on connection: PostgresConnection) async throws -> Catalog {
        if let cached, cached.revision == revision { return cached.catalog }
        let catalog = try await ProductStore().catalog(on: connection)
        if cached.map({ $0.revision < revision }) ?? true {
            generation += 1  // a load begun earlier must not replace this one
            loading = nil
            cached = (catalog, revision, EventLoop.shared.now)
        }
        return catalog
    }

    /// Drops the cached copy; the next read loads the catalog again.
    func invalidate() {
        cached = nil
        loading = nil
        generation += 1
    }

    private func load() async throws -> (Catalog, Int64) {
        try await db.withConnection { try await ProductStore().revisedCatalog(on: $0) }
    }
}
