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
        let task = Task { @Loop in try await self.load() }
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
        let rows = try await db.query("""
            SELECT jsonb_build_object(
                'product_id', product_id, 'type', type, 'entitlements', to_jsonb(entitlements), 'duration', duration,
                'currency', currency, 'amount', amount, 'price', price, 'price_currency', price_currency,
                'subscription_group', subscription_group)::text AS product
              FROM products ORDER BY product_id
            """, []).rows
        return try Self.catalog(from: rows)
    }

    /// Decodes the loaded rows. Synchronous on purpose: typed-throws decoding inside the async `load` crashes
    /// Swift 6.3's optimizer (coroutine splitting), so release builds keep it out of the coroutine.
    private static func catalog(from rows: [PostgresRow]) throws -> Catalog {
        var products: [Product] = []
        products.reserveCapacity(rows.count)
        for row in rows {
            products.append(try Product(json: Data(try row.string("product").utf8)))
        }
        return try Catalog(products: products)
    }

    /// Creates or replaces one product, in `connection`'s transaction.
    static func upsert(_ product: Product, on connection: PostgresConnection) async throws {
        _ = try await connection.query("""
            INSERT INTO products AS p (product_id, type, entitlements, duration, currency, amount, price, price_currency, subscription_group, updated_at)
            SELECT x.product_id, x.type, ARRAY(SELECT jsonb_array_elements_text(COALESCE($1::jsonb -> 'entitlements', '[]'))),
                   x.duration, x.currency, x.amount, x.price, x.price_currency, x.subscription_group, now()
              FROM jsonb_to_record($1::jsonb) AS x(product_id text, type text, duration text, currency text, amount bigint,
                                                   price text, price_currency text, subscription_group text)
            ON CONFLICT (product_id) DO UPDATE SET
                type = EXCLUDED.type, entitlements = EXCLUDED.entitlements, duration = EXCLUDED.duration,
                currency = EXCLUDED.currency, amount = EXCLUDED.amount, price = EXCLUDED.price,
                price_currency = EXCLUDED.price_currency, subscription_group = EXCLUDED.subscription_group, updated_at = now()
            """, [try PostgresJSON(encoding: product)])
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
                try await Self.upsert(product, on: connection)
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
