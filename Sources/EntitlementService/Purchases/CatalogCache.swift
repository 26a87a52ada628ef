import ServiceRuntime
import EntitlementModel
import Foundation

/// The product catalog, kept in PostgreSQL and cached in memory for at most `maxAgeMs`, so every instance
/// sees an admin's change within that time without asking the database on every request.
@Loop
final class CatalogCache {
    private let db: PostgresPool
    private let maxAgeMs: UInt64
    private var cached: (catalog: Catalog, loadedAt: UInt64)?
    private var loading: Task<Catalog, any Error>?
    /// Bumped by `invalidate()`, so a load that began before an invalidation is not cached as current.
    private var generation = 0

    init(db: PostgresPool, maxAgeMs: UInt64 = 1_000) {
        self.db = db
        self.maxAgeMs = maxAgeMs
    }

    /// The catalog as of at most `maxAgeMs` ago; concurrent callers share one load.
    func current() async throws -> Catalog {
        let now = EventLoop.shared.now
        if let cached, now &- cached.loadedAt < maxAgeMs { return cached.catalog }
        if let loading { return try await loading.value }
        let started = generation
        let task = Task.onLoop { try await self.load() }
        loading = task
        defer { loading = nil }
        let catalog = try await task.value
        if generation == started { cached = (catalog, EventLoop.shared.now) }
        return catalog
    }

    /// Drops the cached copy; the next read loads the catalog again.
    func invalidate() {
        cached = nil
        loading = nil
        generation += 1
    }

    private func load() async throws -> Catalog {
        try await ProductStore().catalog(on: db)
    }

    /// Upserts every product of the catalog file at `path` in one transaction (start-up, `PRODUCTS_FILE`).
    func importFile(_ path: String) async throws -> Int {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw CatalogFileError(path: path, problem: "cannot be read")
        }
        let catalog: Catalog
        do {
            catalog = try Catalog(json: data)
        } catch {
            throw CatalogFileError(path: path, problem: String(describing: error))
        }
        try await db.transaction { connection in
            for product in catalog.products {
                try await ProductStore().upsert(product, on: connection)
            }
        }
        invalidate()
        return catalog.products.count
    }
}

/// `PRODUCTS_FILE` could not be used.
struct CatalogFileError: Error, CustomStringConvertible {
    var path: String
    var problem: String
    var description: String { "PRODUCTS_FILE \(path) \(problem)" }
}
