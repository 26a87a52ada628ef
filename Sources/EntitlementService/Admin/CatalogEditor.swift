import ServiceRuntime
import EntitlementModel
import Foundation

/// Catalog changes: one product created or replaced per call through the admin API (audited), or those of the
/// `PRODUCTS_FILE` that differ from what is stored, at start. Each product is its own transaction, which holds the
/// catalog exclusively (``ProductStore/holdCatalogExclusively(on:)``: writers evaluating users wait, and changes
/// take turns) and, when the product unlocks something else than before, marks the event heads of its owners as
/// due, naming the product (``EventStore/markCatalogChanged(_:productID:now:on:)``): the ``ExpirationWorker``, or
/// the next write to one of them, evaluates them with the new catalog and writes the `catalog_change` event of each
/// whose entitlements changed. One statement however many owners, so the change holds writers only briefly, and
/// nothing is lost: the marks commit with the change. A consumable's purchases recorded before the catalog had it
/// (or had it as a consumable) are credited in the same transaction, once each (the ledger's key), and their owners
/// marked too. This instance's catalog cache is dropped at once after it.
@Loop
struct CatalogEditor {
    let db: PostgresPool
    let catalog: CatalogCache
    private let products = ProductStore()
    private let owners = OwnerStore()
    private let heads = EventStore()
    private let audit = AuditStore()
    private let transactions = TransactionStore()
    private let ledger = LedgerStore()

    init(db: PostgresPool, catalog: CatalogCache) {
        self.db = db
        self.catalog = catalog
    }

    /// Stores `product` as `actor`; true when it was new, false when it replaced an entry.
    func put(_ product: Product, actor: String) async throws -> Bool {
        try await change(product, actor: actor)
    }

    /// Stores every product of the catalog file at `path` that is new or differs from the stored one; returns
    /// how many the file holds and how many were stored.
    func importFile(_ path: String) async throws -> (products: Int, stored: Int) {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw CatalogFileError(path: path, problem: "cannot be read")
        }
        let file: Catalog
        do {
            file = try Catalog(json: data)
        } catch {
            throw CatalogFileError(path: path, problem: String(describing: error))
        }
        let stored = try await products.catalog(on: db)
        var count = 0
        for product in file.products where stored.product(product.productID) != product {
            _ = try await change(product, actor: nil)
            count += 1
        }
        return (file.products.count, count)
    }

    /// Stores `product` in one transaction with the marks of its owners' heads and, for an admin (`actor`), the
    /// audit row; true when the product was new.
    private func change(_ product: Product, actor: String?) async throws -> Bool {
        let created = try await db.transaction { connection in
            try await products.holdCatalogExclusively(on: connection)
            let before = try await products.product(product.productID, on: connection)
            if actor == nil && before == product { return false }  // the file's entry, stored meanwhile
            try await products.upsert(product, on: connection)
            if let before, actor == nil {
                // Not an admin action, so not audited; an admin's edit the file undoes is on the record all the same.
                Log.warning("catalog_entry_replaced", ["product_id": product.productID, "before": String(decoding: try JSONEncoder().encode(before), as: UTF8.self)])
            }
            if let actor {
                try await audit.record(actor: actor, action: .productPut, subject: product.productID, userID: nil,
                                       before: try before.map { try PostgresJSON(encoding: $0) }, after: try PostgresJSON(encoding: product),
                                       on: connection)
            }
            let credited = try await creditEarlierPurchases(of: product, on: connection)
            if !product.unlocksAlike(before) || credited > 0 {
                let owners = try await owners.owners(ofProduct: product.productID, on: connection)
                let marked = try await heads.markCatalogChanged(Array(owners), productID: product.productID, now: Date(), on: connection)
                Log.info("catalog_change_marked", ["product_id": product.productID, "owners": owners.count, "marked": marked])
            }
            return before == nil
        }
        catalog.invalidate()
        return created
    }

    /// Credits the purchases of `product`, when it is a consumable, that no credit was made for (recorded while the
    /// catalog did not have it as one): owned, not refunded; returns how many.
    private func creditEarlierPurchases(of product: Product, on connection: PostgresConnection) async throws -> Int {
        guard product.type == .consumable else { return 0 }
        let owed = try await transactions.uncredited(ofProduct: product.productID, on: connection)
        let credits = PurchaseRecorder.consumableCredits(owed.map(\.transaction), catalog: try Catalog(products: [product]))
        try await ledger.credit(credits, on: connection)
        if !credits.isEmpty { Log.info("consumable_credits_due", ["product_id": product.productID, "credits": credits.count]) }
        return credits.count
    }
}

/// `PRODUCTS_FILE` could not be used.
struct CatalogFileError: Error, CustomStringConvertible {
    var path: String
    var problem: String
    var description: String { "PRODUCTS_FILE \(path) \(problem)" }
}
