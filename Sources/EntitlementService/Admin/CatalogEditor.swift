import ServiceRuntime
import EntitlementModel
import Foundation

/// Catalog changes through the admin API: one product created or replaced per call, audited in the same
/// transaction, and this instance's catalog cache dropped at once so its next request sees the change.
@Loop
struct CatalogEditor {
    let db: PostgresPool
    let catalog: CatalogCache
    private let products = ProductStore()
    private let audit = AuditStore()

    init(db: PostgresPool, catalog: CatalogCache) {
        self.db = db
        self.catalog = catalog
    }

    /// Stores `product` as `actor`; true when it was new, false when it replaced an entry.
    func put(_ product: Product, actor: String) async throws -> Bool {
        let created = try await db.transaction { connection in
            // Concurrent PUTs of one id take turns, so exactly one of them reports the creation.
            try await products.lock(product.productID, on: connection)
            let before = try await products.product(product.productID, on: connection)
            try await products.upsert(product, on: connection)
            try await audit.record(actor: actor, action: .productPut, subject: product.productID, userID: nil,
                                   before: try before.map { try PostgresJSON(encoding: $0) }, after: try PostgresJSON(encoding: product),
                                   on: connection)
            return before == nil
        }
        catalog.invalidate()
        return created
    }
}
