import ServiceRuntime
import EntitlementModel
import Foundation

/// The `products` table: the catalog, one row per product.
@Loop
struct ProductStore {
    /// What a ``Product`` is read from.
    private static let columns = """
        product_id, type, array_to_json(entitlements) AS entitlements, duration, currency, amount, price, price_currency, subscription_group
        """

    /// The whole catalog, by product id.
    func catalog(on db: some PostgresQueryable) async throws -> Catalog {
        try Self.catalog(try await db.query("SELECT \(Self.columns) FROM products ORDER BY product_id", []).rows)
    }

    /// Product `id`, or nil when the catalog has none.
    func product(_ id: String, on db: some PostgresQueryable) async throws -> Product? {
        try Self.products(try await db.query("SELECT \(Self.columns) FROM products WHERE product_id = $1", [id]).rows).first
    }

    /// Holds the catalog as it is until the caller's transaction ends (shared: writers evaluating users hold it
    /// together, a catalog change waits for them) and returns its revision (migration 0009), read once the hold
    /// is granted: two statements, since one statement's snapshot would predate its wait for the lock.
    func holdCatalog(on connection: PostgresConnection) async throws -> Int64 {
        let results = try await connection.pipeline([
            PostgresStatement("SELECT pg_advisory_xact_lock_shared(\(Self.catalogLock))::text", []),
            PostgresStatement("SELECT revision FROM catalog_revision", []),
        ])
        return try Self.revision(results[1].rows)
    }

    /// Holds the catalog exclusively until the caller's transaction ends: waits for every writer holding it,
    /// and makes later ones wait, so catalog changes take turns and no user is evaluated meanwhile.
    func holdCatalogExclusively(on db: some PostgresQueryable) async throws {
        _ = try await db.query("SELECT pg_advisory_xact_lock(\(Self.catalogLock))::text", [])
    }

    /// The catalog and its revision, the revision read first: a change committed between the two reads leaves an
    /// older revision beside the newer catalog, which the next writer's ``holdCatalog(on:)`` notices.
    func revisedCatalog(on connection: PostgresConnection) async throws -> (catalog: Catalog, revision: Int64) {
        let results = try await connection.pipeline([
            PostgresStatement("SELECT revision FROM catalog_revision", []),
            PostgresStatement("SELECT \(Self.columns) FROM products ORDER BY product_id", []),
        ])
        return (try Self.catalog(results[1].rows), try Self.revision(results[0].rows))
    }

    /// The advisory lock key (two-key form, apart from any single-key lock) of ``holdCatalog(on:)``.
    private static let catalogLock = "hashtext('catalog'), 0"

    private static func revision(_ rows: [PostgresRow]) throws -> Int64 {
        guard let row = rows.first else {
            throw PostgresError(kind: .decoding, message: "catalog_revision has no row (migration 0009)")
        }
        return try row.int64("revision")
    }

    /// Creates or replaces `product`; the table's trigger records a changed price in `product_prices` (migration
    /// 0017), which ``ReportStore`` reads.
    func upsert(_ product: Product, on db: some PostgresQueryable) async throws {
        var parameters: [any PostgresEncodable] = [
            product.productID, product.type.rawValue, product.duration?.description, product.currency, product.amount,
            product.price, product.priceCurrency, product.subscriptionGroup,
        ]
        // One parameter per entitlement: each name travels as its own text value.
        let entitlements = product.entitlements.indices.map { "$\(parameters.count + 1 + $0)" }.joined(separator: ", ")
        parameters += product.entitlements as [any PostgresEncodable]
        _ = try await db.query("""
            INSERT INTO products (product_id, type, duration, currency, amount, price, price_currency, subscription_group, entitlements, updated_at)
            VALUES ($1, $2, $3, $4, $5, $6, $7, $8, ARRAY[\(entitlements)]::text[], now())
            ON CONFLICT (product_id) DO UPDATE SET
                type = EXCLUDED.type, entitlements = EXCLUDED.entitlements, duration = EXCLUDED.duration,
                currency = EXCLUDED.currency, amount = EXCLUDED.amount, price = EXCLUDED.price,
                price_currency = EXCLUDED.price_currency, subscription_group = EXCLUDED.subscription_group, updated_at = now()
            """, parameters)
    }

    /// Decodes rows of ``columns`` as a catalog; synchronous, like ``products(_:)``.
    private static func catalog(_ rows: [PostgresRow]) throws -> Catalog {
        try Catalog(products: try products(rows))
    }

    /// Decodes rows of ``columns``. Synchronous on purpose: typed-throws decoding inside an async function crashes
    /// Swift 6.3's optimizer (coroutine splitting), so release builds keep it out of the coroutine.
    private static func products(_ rows: [PostgresRow]) throws -> [Product] {
        var products: [Product] = []
        products.reserveCapacity(rows.count)
        for row in rows {
            let id = try row.string("product_id")
            guard let type = ProductType(rawValue: try row.string("type")) else {
                throw PostgresError(kind: .decoding, message: "product \(id) has an unknown type")
            }
            products.append(try Product(
                productID: id, type: type,
                entitlements: try JSONDecoder().decode([String].self, from: Data(try row.string("entitlements").utf8)),
                duration: try row.optionalString("duration").map { try ISODuration(parsing: $0) },
                currency: try row.optionalString("currency"), amount: try row.optionalInt("amount"), price: try row.optionalString("price"),
                priceCurrency: try row.optionalString("price_currency"), subscriptionGroup: try row.optionalString("subscription_group")))
        }
        return products
    }
}
