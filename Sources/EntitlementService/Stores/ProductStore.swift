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

    /// Waits for, then holds until the caller's transaction ends, the lock writers of product `id` take turns
    /// on, whether or not the product exists yet.
    func lock(_ id: String, on db: some PostgresQueryable) async throws {
        _ = try await db.query("SELECT pg_advisory_xact_lock(hashtext($1))", ["product:" + id])
    }

    /// Creates or replaces `product`.
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
