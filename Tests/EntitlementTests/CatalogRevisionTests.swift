import EntitlementModel
import Foundation
import Testing
@testable import EntitlementService
@testable import FakeAppStore
@testable import ServiceRuntime

/// Writers evaluate users with the catalog in force (migration 0009's revision, read under a shared hold of the
/// catalog), never a cached copy another instance's catalog change has replaced; the catalog file's entries are
/// stored only when they differ.
@Suite struct CatalogRevisionTests {
    private static let extras = try! Product(productID: "com.example.lifetime", type: .nonConsumable, entitlements: ["pro", "extras"])

    @Test @Loop func aWriterWithAStaleCachedCatalogEvaluatesWithTheOneInForce() async throws {
        try await TestDatabase.withMigratedDatabase { _, pool in
            try await TestDatabase.storeHarnessCatalog(on: pool)
            // Two instances: B records a purchase (its cache now holds the catalog), A changes the product.
            let eventsA = EventRecorder(catalog: CatalogCache(db: pool), delivers: false)
            let eventsB = EventRecorder(catalog: CatalogCache(db: pool, maxAgeMs: 3_600_000), delivers: false)
            var receipt = FakeReceipt(bundleID: "com.example.app")
            let purchase = receipt.addPurchase("com.example.lifetime", transactionID: "9100001", purchased: Date().addingTimeInterval(-60))
            _ = try await PurchaseRecorder(db: pool, restorePolicy: .transfer, events: eventsB).record(
                transactions: [purchase], renewals: [], latestReceipt: nil, appleStatus: 0, environment: .sandbox,
                context: .init(poster: "u", movesOwnership: true, actor: "test", claim: nil, orderID: nil))
            #expect(try await eventsB.catalog.current().product("com.example.lifetime")?.entitlements == ["pro"])
            _ = try await CatalogEditor(db: pool, catalog: eventsA.catalog).put(Self.extras, actor: "admin#1")

            // B's grant sees the product as it now is: one grant event, no step back to the old entry.
            _ = try await GrantEditor(db: pool, events: eventsB).create(userID: "u", entitlement: "gift", expiresAt: nil, reason: "test",
                                                                     actor: "admin#1", now: Date())
            let events = try await pool.query("SELECT type, payload FROM webhook_events ORDER BY position", []).rows
            let payloads = try events.map { try $0.string("payload") }
            #expect(try events.map { try $0.string("type") } == ["non_consumable_purchase", "catalog_change", "grant"], "\(payloads)")
            let last = try JSONSerialization.jsonObject(with: Data(try #require(events.last).string("payload").utf8)) as? [String: Any]
            #expect((last?["entitlements"] as? [String: Any]).map { Set($0.keys) } == ["pro", "extras", "gift"])
            #expect(try await eventsB.catalog.current().product("com.example.lifetime") == Self.extras)
        }
    }

    /// A catalog change marks only heads holding a state, due at once, naming its product; changes of two
    /// products waiting together name neither.
    @Test @Loop func catalogChangesMarkHeadsWithAStateNamingTheirProduct() async throws {
        try await TestDatabase.withMigratedDatabase { _, pool in
            let store = EventStore()
            let now = Date()
            try await pool.transaction { connection in
                var heads = try await store.lockHeads(["a", "b"], on: connection).filter { $0.userID == "a" }
                heads[0].state = EntitlementState(entitlements: [:], consumables: [:])
                try await store.updateHeads(heads, on: connection)
            }
            let pending = { @Loop in
                try await pool.query("SELECT user_id, pending_catalog_change AS p, next_change_at <= $1 AS due FROM user_event_heads ORDER BY user_id",
                                     [now]).rows.map { (try $0.string("user_id"), try $0.optionalString("p"), try $0.optionalBool("due")) }
            }
            #expect(try await store.markCatalogChanged(["a", "b", "c"], productID: "p1", now: now, on: pool) == 1)
            var rows = try await pending()
            #expect(rows.map(\.0) == ["a", "b"] && rows[0].1 == "p1" && rows[0].2 == true && rows[1].1 == nil && rows[1].2 == nil)
            _ = try await store.markCatalogChanged(["a"], productID: "p1", now: now, on: pool)
            #expect(try await pending()[0].1 == "p1")
            _ = try await store.markCatalogChanged(["a"], productID: "p2", now: now, on: pool)
            rows = try await pending()
            #expect(rows[0].1 == "")
            #expect(DerivedEntitlementEvent.derive(
                before: EntitlementState(entitlements: [:], consumables: [:]), after: EntitlementState(entitlements: [:], consumables: ["coins": 1]),
                cause: .catalogChanged(productID: nil)) == DerivedEntitlementEvent(type: .catalogChange))
        }
    }

    /// Two instances' workers draining one catalog change between them: every owner gets exactly one event.
    @Test @Loop func twoInstancesShareACatalogChangesOwnersAndWriteEachEventOnce() async throws {
        try await TestDatabase.withMigratedDatabase { url, pool in
            try await TestDatabase.storeHarnessCatalog(on: pool)
            _ = try await pool.query("""
                WITH users AS (SELECT n, 'owner-' || n AS user_id, (9200000 + n)::text AS id FROM generate_series(1, 450) AS n),
                     transactions AS (
                         INSERT INTO app_store_transactions (transaction_id, original_transaction_id, product_id, environment, purchase_date)
                         SELECT id, id, 'com.example.lifetime', 'Sandbox', now() - interval '1 day' FROM users),
                     owners AS (INSERT INTO purchase_owners (original_transaction_id, user_id) SELECT id, user_id FROM users)
                INSERT INTO user_event_heads (user_id, last_sequence, state)
                SELECT user_id, 1, '{"entitlements": {}, "consumables": {}}' FROM users
                """, [])
            _ = try await CatalogEditor(db: pool, catalog: CatalogCache(db: pool)).put(Self.extras, actor: "admin#1")

            let other = PostgresPool(conninfo: url, size: 2)
            let drains = [pool, other].map { db in
                Task.onLoop {
                    let events = EventRecorder(catalog: CatalogCache(db: db), delivers: false)
                    var taken = 0
                    while true {
                        let batch = try await db.transaction { try await events.catchUp(limit: 40, now: Date(), on: $0) }
                        if batch == 0 { return taken }
                        taken += batch
                    }
                }
            }
            var taken: [Int] = []
            for drain in drains { taken.append(try await drain.value) }
            await other.close()
            #expect(taken.reduce(0, +) == 450, "\(taken)")  // each head taken once, however the two shared them
            let written = try await pool.query("""
                SELECT count(*)::int AS events, count(DISTINCT user_id)::int AS users, min(sequence)::int AS low, max(sequence)::int AS high,
                       bool_and(type = 'catalog_change' AND payload LIKE '%"extras"%') AS all_changes,
                       (SELECT count(*)::int FROM user_event_heads WHERE pending_catalog_change IS NOT NULL) AS marked
                  FROM webhook_events
                """, []).rows[0]
            #expect(try written.int("events") == 450 && written.int("users") == 450 && written.int("marked") == 0)
            #expect(try written.int("low") == 2 && written.int("high") == 2 && written.bool("all_changes"))
        }
    }

    @Test @Loop func theCatalogFileStoresOnlyWhatDiffers() async throws {
        try await TestDatabase.withMigratedDatabase { _, pool in
            let file = FileManager.default.temporaryDirectory.appendingPathComponent("catalog-\(randomToken()).json")
            defer { try? FileManager.default.removeItem(at: file) }
            try Data(ServiceHarness.catalog.utf8).write(to: file)
            let editor = CatalogEditor(db: pool, catalog: CatalogCache(db: pool))
            let revision = { @Loop in try await pool.query("SELECT revision FROM catalog_revision", []).rows[0].int64("revision") }

            let first = try await editor.importFile(file.path)
            #expect(first.stored == first.products && first.products > 0)
            let afterFirst = try await revision()
            #expect(afterFirst > 1)

            // Again at the next start: nothing stored, so no revision and no announcement to every cache.
            #expect(try await editor.importFile(file.path) == (first.products, 0))
            #expect(try await revision() == afterFirst)
        }
    }
}
