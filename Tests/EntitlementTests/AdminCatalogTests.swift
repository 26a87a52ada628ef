import EntitlementModel
import Foundation
import Testing
@testable import AppStore
@testable import EntitlementService
@testable import FakeAppStore
@testable import ServiceRuntime

extension AdminTests {
    /// Catalog administration over real HTTP: create and replace one product, list them, every validation error
    /// naming its field, and the change visible to this instance at once.
    @Suite struct AdminCatalogTests {
        @Test @Loop func putCreatesThenReplacesAndTheCatalogSeesItAtOnce() async throws {
            try await AdminHarness.run { service in
                // The catalog cache must not hide the new product: an order for it is accepted right away.
                _ = try await service.call("GET", "/v1/admin/products")
                let refused = try await service.call("POST", "/v1/orders", key: .app, body: #"{"user_id": "u1", "product_id": "com.example.gold"}"#)
                #expect(refused.status == 422, "\(refused)")

                let created = try await service.call("PUT", "/v1/admin/products/com.example.gold",
                                                     body: #"{"type": "non_renewing", "entitlements": ["gold"], "duration": "P1M", "price": "2.99", "price_currency": "USD", "extra": true}"#)
                #expect(created.status == 201, "\(created)")
                #expect(created.object["product_id"] as? String == "com.example.gold")
                #expect(created.object["duration"] as? String == "P1M")
                #expect(created.object["extra"] == nil)
                let order = try await service.call("POST", "/v1/orders", key: .app, body: #"{"user_id": "u1", "product_id": "com.example.gold"}"#)
                #expect(order.status == 201, "\(order)")

                let replaced = try await service.call("PUT", "/v1/admin/products/com.example.gold",
                                                      body: #"{"product_id": "com.example.gold", "type": "non_consumable", "entitlements": ["gold", "silver"]}"#)
                #expect(replaced.status == 200, "\(replaced)")
                #expect(replaced.object["duration"] == nil)

                let list = try await service.call("GET", "/v1/admin/products")
                #expect(list.status == 200)
                let products = try #require(list.object["products"] as? [[String: Any]])
                #expect(products.compactMap { $0["product_id"] as? String }
                        == ["com.example.coins.100", "com.example.gold", "com.example.lifetime", "com.example.premium.monthly"])
                let gold = try #require(products.first { $0["product_id"] as? String == "com.example.gold" })
                #expect(gold["type"] as? String == "non_consumable")
                #expect(gold["entitlements"] as? [String] == ["gold", "silver"])
                #expect(gold["price"] == nil)

                let audit = try await service.sql("""
                    SELECT actor, subject, user_id, before IS NULL AS was_new, after ->> 'type' AS type
                      FROM audit_events WHERE action = 'product.put' ORDER BY event_id
                    """)
                #expect(audit.count == 2)
                #expect(try audit.map { try $0.bool("was_new") } == [true, false])
                #expect(try audit.map { try $0.string("type") } == ["non_renewing", "non_consumable"])
                #expect(try audit.allSatisfy { try $0.string("actor") == "admin#1" && $0.string("subject") == "com.example.gold" && $0["user_id"] == nil })
            }
        }

        /// A product's catalog entry decides what its owners hold: changing what it unlocks marks each owner's
        /// event head in the change's transaction, and the expiration worker writes a `catalog_change` event for each
        /// whose entitlements changed; a change that unlocks the same (a price, the entitlements reordered) or a
        /// product nobody owns marks no one.
        @Test @Loop func aChangeOfWhatAProductUnlocksWritesAnEventForEachOwner() async throws {
            try await AdminHarness.run { service in
                let now = Date()
                for (user, id) in [("owner-a", "8000001"), ("owner-b", "8000002")] {
                    var receipt = FakeReceipt(bundleID: AdminHarness.bundleID)
                    receipt.addPurchase("com.example.lifetime", transactionID: id, purchased: now.addingTimeInterval(-3_600))
                    #expect(try await service.post(receipt, for: user).status == 200)
                }
                var subscription = FakeReceipt(bundleID: AdminHarness.bundleID)
                subscription.addSubscription("com.example.premium.monthly", originalTransactionID: "8000003",
                                             start: now.addingTimeInterval(-86_400), period: ISODuration(months: 1))
                #expect(try await service.post(subscription, for: "bystander").status == 200)
                let events = { @Loop in
                    try await service.sql("SELECT user_id, type, payload FROM webhook_events ORDER BY position").map {
                        (try $0.string("user_id"), try $0.string("type"), try $0.string("payload"))
                    }
                }
                let marked = { @Loop in
                    try await service.sql("SELECT user_id FROM user_event_heads WHERE pending_catalog_change IS NOT NULL").map { try $0.string("user_id") }
                }
                #expect(try await events().map(\.1) == ["non_consumable_purchase", "non_consumable_purchase", "initial_purchase"])
                let put = { @Loop (body: String) in
                    try await service.call("PUT", "/v1/admin/products/com.example.lifetime", body: body)
                }

                // Unlocking the same: a new price, then the same entitlements reordered: no one is marked.
                #expect(try await put(#"{"type": "non_consumable", "entitlements": ["pro"], "price": "24.99", "price_currency": "EUR"}"#).status == 200)
                #expect(try await marked().isEmpty)

                // Unlocking more: the answers change at once, and each owner gets an event; the bystander none.
                #expect(try await put(#"{"type": "non_consumable", "entitlements": ["pro", "extras"]}"#).status == 200)
                #expect(try await service.entitlement("extras", of: "owner-a")?["active"] as? Bool == true)
                #expect(try await eventually(timeout: 10) { try await events().count == 5 ? marked().isEmpty : false })
                let changed = try await events().dropFirst(3)
                #expect(changed.map(\.0).sorted() == ["owner-a", "owner-b"])
                for (user, type, payload) in changed {
                    #expect(type == "catalog_change")
                    let body = try #require(try JSONSerialization.jsonObject(with: Data(payload.utf8)) as? [String: Any])
                    #expect(body["type"] as? String == "catalog_change")
                    #expect(body["product_id"] as? String == "com.example.lifetime")
                    #expect(body["sequence"] as? Int == 2)
                    #expect((body["entitlements"] as? [String: Any]).map { Set($0.keys) } == ["pro", "extras"], "\(user)")
                }
                #expect(try await put(#"{"type": "non_consumable", "entitlements": ["extras", "pro"]}"#).status == 200)
                #expect(try await marked().isEmpty)

                // A product nobody owns marks no one.
                #expect(try await service.call("PUT", "/v1/admin/products/com.example.new",
                                               body: #"{"type": "non_consumable", "entitlements": ["pro"]}"#).status == 201)
                #expect(try await marked().isEmpty)
                // Unlocking less takes it away again, with its events.
                #expect(try await put(#"{"type": "non_consumable", "entitlements": ["pro"]}"#).status == 200)
                #expect(try await service.entitlement("extras", of: "owner-a") == nil)
                #expect(try await eventually(timeout: 10) { try await events().count == 7 ? marked().isEmpty : false })
                #expect(try await events().dropFirst(5).map(\.1) == ["catalog_change", "catalog_change"])
            }
        }

        /// A consumable bought before the catalog had it is credited when the catalog gets it, once, in the
        /// change's transaction: the balance shows at once, and the owner's event follows.
        @Test @Loop func aConsumableBoughtBeforeTheCatalogHadItIsCreditedWhenItDoes() async throws {
            try await AdminHarness.run { service in
                var receipt = FakeReceipt(bundleID: AdminHarness.bundleID)
                receipt.addPurchase("com.example.later.coins", transactionID: "8100001", purchased: Date().addingTimeInterval(-60), quantity: 2)
                let posted = try await service.post(receipt, for: "early-buyer")
                #expect(posted.status == 200 && (posted.object["consumables"] as? [String: Any])?.isEmpty == true, "\(posted)")
                let balances = { @Loop in
                    try await service.call("GET", "/v1/users/early-buyer/entitlements", key: .app).object["consumables"] as? [String: Int]
                }
                let body = #"{"type": "consumable", "currency": "later", "amount": 10}"#
                #expect(try await service.call("PUT", "/v1/admin/products/com.example.later.coins", body: body).status == 201)
                #expect(try await balances() == ["later": 20])
                #expect(try await eventually(timeout: 10) {
                    try await service.sql("SELECT 1 FROM webhook_events WHERE user_id = 'early-buyer' AND type = 'catalog_change'").count == 1
                })
                // Changed again (another price): nothing more is owed.
                let priced = #"{"type": "consumable", "currency": "later", "amount": 10, "price": "0.99", "price_currency": "USD"}"#
                #expect(try await service.call("PUT", "/v1/admin/products/com.example.later.coins", body: priced).status == 200)
                #expect(try await balances() == ["later": 20])
            }
        }

        /// A refund takes back what the purchase credited even when the catalog no longer has the product as a
        /// consumable: the credit is the ledger's, not the catalog's.
        @Test @Loop func aRefundTakesBackACreditAfterTheProductStoppedBeingAConsumable() async throws {
            try await AdminHarness.run { service in
                let consumable = #"{"type": "consumable", "currency": "gems", "amount": 10}"#
                #expect(try await service.call("PUT", "/v1/admin/products/com.example.gems", body: consumable).status == 201)
                var receipt = FakeReceipt(bundleID: AdminHarness.bundleID)
                receipt.addPurchase("com.example.gems", transactionID: "8200001", purchased: Date().addingTimeInterval(-120))
                let posted = try await service.post(receipt, for: "gem-buyer")
                #expect(posted.object["consumables"] as? [String: Int] == ["gems": 10], "\(posted)")

                let unlocking = #"{"type": "non_consumable", "entitlements": ["gem-badge"]}"#
                #expect(try await service.call("PUT", "/v1/admin/products/com.example.gems", body: unlocking).status == 200)
                receipt.cancel(transactionID: "8200001", at: Date().addingTimeInterval(-60))
                let refunded = try await service.post(receipt, for: "gem-buyer")
                #expect(refunded.object["consumables"] as? [String: Int] == ["gems": 0], "\(refunded)")

                // A consumable again: the refunded purchase is not credited a second time.
                #expect(try await service.call("PUT", "/v1/admin/products/com.example.gems", body: consumable).status == 200)
                let balance = try await service.call("GET", "/v1/users/gem-buyer/entitlements", key: .app)
                #expect(balance.object["consumables"] as? [String: Int] == ["gems": 0], "\(balance)")
            }
        }

        @Test @Loop func everyFieldSurvivesTheDatabase() async throws {
            try await AdminHarness.run { service in
                // Names with what PostgreSQL's array text form would have to quote or escape.
                let names = [#"a,b"#, "{c}", #"say "hi""#, #"back\slash"#, "NULL", " spaced ", "é"]
                let pass: [String: Any] = ["type": "non_renewing", "entitlements": names, "duration": "P1Y1M2W2D", "currency": "coins",
                                           "amount": 5, "price": "12.50", "price_currency": "EUR", "subscription_group": "group, \"one\""]
                #expect(try await service.call("PUT", "/v1/admin/products/com.example.pass", body: AdminHarness.json(pass)).status == 201)
                let list = try await service.call("GET", "/v1/admin/products")
                let stored = try #require((list.object["products"] as? [[String: Any]])?.first { $0["product_id"] as? String == "com.example.pass" })
                #expect(AdminHarness.json(stored) == AdminHarness.json(pass.merging(["product_id": "com.example.pass"]) { $1 }))

                // Replacing it audits what was stored as `before`.
                #expect(try await service.call("PUT", "/v1/admin/products/com.example.pass",
                                               body: #"{"type": "consumable", "currency": "coins", "amount": 1}"#).status == 200)
                let audit = try await service.sql("SELECT before FROM audit_events WHERE action = 'product.put' AND before IS NOT NULL")
                let before = try JSONSerialization.jsonObject(with: Data(try #require(audit.first).string("before").utf8)) as? [String: Any]
                #expect(before.map(AdminHarness.json) == AdminHarness.json(stored))
                let consumable = try await service.call("GET", "/v1/admin/products")
                let replaced = (consumable.object["products"] as? [[String: Any]])?.first { $0["product_id"] as? String == "com.example.pass" }
                #expect(replaced?["entitlements"] as? [String] == [])
                #expect(replaced?["duration"] == nil)
            }
        }

        @Test @Loop func validationErrorsNameTheField() async throws {
            try await AdminHarness.run { service in
                let cases: [(path: String, body: String, field: String)] = [
                    ("p1", #"{"product_id": "p2", "type": "non_consumable", "entitlements": ["a"]}"#, "product_id"),
                    ("p1", #"{"product_id": 5, "type": "non_consumable", "entitlements": ["a"]}"#, "product_id"),
                    ("p1", #"{"product_id": null, "type": "non_consumable", "entitlements": ["a"]}"#, "product_id"),
                    ("p1", #"{"entitlements": ["a"]}"#, "type"),
                    ("p1", #"{"type": "subscription", "entitlements": ["a"]}"#, "type"),
                    ("p1", #"{"type": "non_renewing", "entitlements": ["a"]}"#, "duration"),
                    ("p1", #"{"type": "non_renewing", "entitlements": ["a"], "duration": "P1X"}"#, "duration"),
                    ("p1", #"{"type": "non_renewing", "entitlements": ["a"], "duration": "PT1H"}"#, "duration"),
                    ("p1", #"{"type": "consumable", "amount": 5}"#, "currency"),
                    ("p1", #"{"type": "consumable", "currency": "coins"}"#, "amount"),
                    ("p1", #"{"type": "consumable", "currency": "coins", "amount": 0}"#, "amount"),
                    ("p1", #"{"type": "consumable", "currency": "coins", "amount": 1.5}"#, "amount"),
                    ("p1", #"{"type": "consumable", "currency": "coins", "amount": 1000000000001}"#, "amount"),
                    ("p1", #"{"type": "non_consumable"}"#, "entitlements"),
                    ("p1", #"{"type": "non_consumable", "entitlements": ["a", "a"]}"#, "entitlements[1]"),
                    ("p1", #"{"type": "non_consumable", "entitlements": "a"}"#, "entitlements"),
                    ("p1", #"{"type": "non_consumable", "entitlements": ["a"], "price": "4,99"}"#, "price"),
                    ("p1", #"{"type": "non_consumable", "entitlements": ["a"], "price_currency": "usd"}"#, "price_currency"),
                    ("bad%20id", #"{"type": "non_consumable", "entitlements": ["a"]}"#, "product_id"),
                    (String(repeating: "p", count: 256), #"{"type": "non_consumable", "entitlements": ["a"]}"#, "product_id"),
                ]
                for (path, body, field) in cases {
                    let reply = try await service.call("PUT", "/v1/admin/products/\(path)", body: body)
                    #expect(reply.status == 400, "\(path) \(body): \(reply)")
                    #expect(reply.field == field, "\(path) \(body): \(reply)")
                    #expect((reply.object["detail"] as? String)?.contains(field) == true, "\(reply)")
                }
                for body in ["[]", "\"x\"", "{", ""] {
                    let reply = try await service.call("PUT", "/v1/admin/products/p1", body: body)
                    #expect(reply.status == 400, "\(body): \(reply)")
                }
                let nonUTF8 = try await service.call("PUT", "/v1/admin/products/p1", bytes: [0x7B, 0xFF, 0x7D])
                #expect(nonUTF8.status == 400)
                #expect(try await service.sql("SELECT 1 FROM audit_events").isEmpty)
                #expect(try await service.sql("SELECT 1 FROM products WHERE product_id = 'p1'").isEmpty)
            }
        }
    }
}
