import ServiceRuntime
import EntitlementModel
import Foundation

/// Catalog changes through the admin API: one product created or replaced per call, audited in the same
/// transaction, and this instance's catalog cache dropped at once so its next request sees the change.
@Loop
struct CatalogEditor {
    let db: PostgresPool
    let catalog: CatalogCache

    /// Stores `product` as `actor`; true when it was new, false when it replaced an entry.
    func put(_ product: Product, actor: String) async throws -> Bool {
        let created = try await db.transaction { connection in
            // Concurrent PUTs of one id take turns, so exactly one of them reports the creation.
            _ = try await connection.query("SELECT pg_advisory_xact_lock(hashtext('product:' || $1::text))", [product.productID])
            let before = try await connection.query("""
                SELECT jsonb_strip_nulls(jsonb_build_object(
                    'product_id', product_id, 'type', type, 'entitlements', to_jsonb(entitlements), 'duration', duration,
                    'currency', currency, 'amount', amount, 'price', price, 'price_currency', price_currency,
                    'subscription_group', subscription_group))::text AS product
                  FROM products WHERE product_id = $1
                """, [product.productID]).rows.first.map { PostgresJSON(try $0.string("product")) }
            try await CatalogCache.upsert(product, on: connection)
            let audit = AuditLog.record(actor: actor, action: AuditLog.Action.productPut, subject: product.productID, userID: nil,
                                        before: before, after: try PostgresJSON(encoding: product))
            _ = try await connection.query(audit.sql, audit.parameters)
            return before == nil
        }
        catalog.invalidate()
        return created
    }
}
