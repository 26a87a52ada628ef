import EntitlementModel
import Foundation
import Testing
@testable import AppStore
@testable import EntitlementService
@testable import FakeAppStore
@testable import ServiceRuntime

extension AdminTests {
    /// The purchase report over real HTTP, on transactions written straight into the database.
    @Suite struct AdminReportTests {
        /// Inserts one verified transaction.
        @Loop static func insert(_ service: AdminHarness, _ id: String, product: String, environment: String, purchased: String,
                                 quantity: Int = 1, refunded: Bool = false, ownership: String = "purchased") async throws {
            _ = try await service.sql("""
                INSERT INTO app_store_transactions (transaction_id, original_transaction_id, product_id, environment, purchase_date,
                                                    quantity, cancellation_date, ownership)
                VALUES ($1, $1, $2, $3, $4::timestamptz, $5, CASE WHEN $6 THEN $4::timestamptz + interval '1 day' END, $7)
                """, [id, product, environment, purchased, quantity, refunded, ownership])
        }

        /// A purchase counts at the catalog price in force when it was made: a later price, or a price in another
        /// currency, leaves past revenue as it was (each price its own row). A period ended by an upgrade was paid
        /// for: not a refund.
        @Test @Loop func pastRevenueKeepsItsPriceAndAnUpgradeIsNoRefund() async throws {
            try await AdminHarness.run { service in
                let monthly = "com.example.premium.monthly"
                try await Self.insert(service, "1", product: monthly, environment: "Production", purchased: "2026-03-01T00:00:00Z")
                try await Self.insert(service, "2", product: monthly, environment: "Production", purchased: "2026-03-02T00:00:00Z")
                _ = try await service.sql("""
                    UPDATE app_store_transactions SET is_upgraded = true, cancellation_date = purchase_date + interval '10 days' WHERE transaction_id = '2'
                    """)
                let rows = { @Loop () async throws -> [String] in
                    let reply = try await service.call("GET", "/v1/admin/reports/purchases?from=2026-03-01T00:00:00Z&to=2099-01-01T00:00:00Z")
                    return (reply.object["rows"] as? [[String: Any]] ?? []).filter { $0["product_id"] as? String == monthly }.map {
                        "count=\($0["count"] as? Int ?? -1) refunded=\($0["refunded"] as? Int ?? -1) price=\($0["price"] as? String ?? "null") "
                            + "\($0["price_currency"] as? String ?? "null") revenue=\($0["revenue"] as? String ?? "null")"
                    }
                }
                #expect(try await rows() == ["count=2 refunded=0 price=4.99 USD revenue=9.98"])
                // A partial refund keeps the share not refunded.
                _ = try await service.sql("""
                    UPDATE app_store_transactions SET cancellation_date = purchase_date + interval '1 day', revocation_percentage = 40000
                     WHERE transaction_id = '1'
                    """)
                #expect(try await rows() == ["count=2 refunded=1 price=4.99 USD revenue=7.98"])
                _ = try await service.sql("UPDATE app_store_transactions SET cancellation_date = NULL, revocation_percentage = NULL WHERE transaction_id = '1'")

                let yen = #"{"type": "auto_renewable", "entitlements": ["premium"], "subscription_group": "group.premium", "price": "800", "price_currency": "JPY"}"#
                #expect(try await service.call("PUT", "/v1/admin/products/\(monthly)", body: yen).status == 200)
                #expect(try await rows() == ["count=2 refunded=0 price=4.99 USD revenue=9.98"])
                try await Self.insert(service, "3", product: monthly, environment: "Production", purchased: RFC3339.string(from: Date().addingTimeInterval(1)))
                #expect(try await rows() == ["count=1 refunded=0 price=800 JPY revenue=800", "count=2 refunded=0 price=4.99 USD revenue=9.98"])
            }
        }

        @Test @Loop func purchasesAreGroupedByProductAndEnvironment() async throws {
            try await AdminHarness.run { service in
                let monthly = "com.example.premium.monthly", coins = "com.example.coins.100"
                try await Self.insert(service, "1", product: monthly, environment: "Production", purchased: "2026-03-01T00:00:00Z")
                try await Self.insert(service, "2", product: monthly, environment: "Production", purchased: "2026-03-15T10:00:00Z", refunded: true)
                try await Self.insert(service, "3", product: monthly, environment: "Sandbox", purchased: "2026-03-02T00:00:00Z")
                try await Self.insert(service, "4", product: coins, environment: "Production", purchased: "2026-03-31T23:59:59Z", quantity: 3)
                try await Self.insert(service, "5", product: "com.example.unknown", environment: "Production", purchased: "2026-03-05T00:00:00Z")
                try await Self.insert(service, "6", product: monthly, environment: "Production", purchased: "2026-04-01T00:00:00Z")  // at `to`: out
                try await Self.insert(service, "7", product: monthly, environment: "Production", purchased: "2026-02-28T23:59:59Z")  // before: out
                // A family member's copy of a purchase is not a sale.
                try await Self.insert(service, "8", product: monthly, environment: "Production", purchased: "2026-03-02T00:00:00Z",
                                      ownership: "family_shared")

                let reply = try await service.call("GET", "/v1/admin/reports/purchases?from=2026-03-01T00:00:00Z&to=2026-04-01T00:00:00Z")
                #expect(reply.status == 200, "\(reply)")
                #expect(reply.object["from"] as? String == "2026-03-01T00:00:00Z")
                #expect(reply.object["environment"] is NSNull)
                let rows = try #require(reply.object["rows"] as? [[String: Any]])
                let summary = rows.map { row in
                    "\(row["environment"] as? String ?? "?") \(row["product_id"] as? String ?? "?") count=\(row["count"] as? Int ?? -1) "
                        + "refunded=\(row["refunded"] as? Int ?? -1) units=\(row["units"] as? Int ?? -1) "
                        + "price=\(row["price"] as? String ?? "null") \(row["price_currency"] as? String ?? "null") "
                        + "revenue=\(row["revenue"] as? String ?? "null") type=\(row["product_type"] as? String ?? "null")"
                }
                #expect(summary == [
                    "Production com.example.coins.100 count=1 refunded=0 units=3 price=0.99 USD revenue=2.97 type=consumable",
                    "Production com.example.premium.monthly count=2 refunded=1 units=2 price=4.99 USD revenue=4.99 type=auto_renewable",
                    "Production com.example.unknown count=1 refunded=0 units=1 price=null null revenue=null type=null",
                    "Sandbox com.example.premium.monthly count=1 refunded=0 units=1 price=4.99 USD revenue=4.99 type=auto_renewable",
                ])

                let sandbox = try await service.call("GET", "/v1/admin/reports/purchases?from=2026-03-01T00:00:00Z&to=2026-04-01T00:00:00Z&environment=Sandbox")
                #expect(sandbox.object["environment"] as? String == "Sandbox")
                #expect((sandbox.object["rows"] as? [[String: Any]])?.compactMap { $0["environment"] as? String } == ["Sandbox"])

                // An offset in the window is honoured: 02:00+02:00 is midnight UTC, so transaction 6 is in.
                let shifted = try await service.call("GET", "/v1/admin/reports/purchases?from=2026-03-01T00:00:00Z&to=2026-04-01T02:00:01%2B02:00&environment=Production")
                let counts = (shifted.object["rows"] as? [[String: Any]])?.first { $0["product_id"] as? String == monthly }?["count"] as? Int
                #expect(counts == 3, "\(shifted)")
            }
        }

        @Test @Loop func windowAndEnvironmentAreChecked() async throws {
            try await AdminHarness.run { service in
                let cases: [(String, String)] = [
                    ("from=yesterday&to=2026-04-01T00:00:00Z", "from"),
                    ("from=2026-03-01T00:00:00Z&to=2026-13-01T00:00:00Z", "to"),
                    ("from=2026-03-01T00:00:00Z&to=", "to"),
                    ("from=2026-04-01T00:00:00Z&to=2026-04-01T00:00:00Z", "to"),
                    ("from=2026-03-01T00:00:00Z&to=2026-04-01T00:00:00Z&environment=production", "environment"),
                    // A name given twice is refused on every keyed route, not settled by the last value.
                    ("environment=Sandbox&from=2026-03-01T00:00:00Z&environment=Production", "environment"),
                ]
                for (query, field) in cases {
                    let reply = try await service.call("GET", "/v1/admin/reports/purchases?\(query)")
                    #expect(reply.status == 400, "\(query): \(reply)")
                    #expect(reply.field == field, "\(query): \(reply)")
                }
                let empty = try await service.call("GET", "/v1/admin/reports/purchases?from=0001-01-01T00:00:00Z&to=9999-12-31T23:59:59Z")
                #expect(empty.status == 200, "\(empty)")
                #expect((empty.object["rows"] as? [Any])?.isEmpty == true)

                // Either end may be left out: `to` is then now, `from` 30 days before `to`.
                let untilApril = try await service.call("GET", "/v1/admin/reports/purchases?to=2026-04-01T00:00:00Z")
                #expect(untilApril.status == 200, "\(untilApril)")
                #expect(untilApril.object["from"] as? String == "2026-03-02T00:00:00Z")
                #expect(untilApril.object["to"] as? String == "2026-04-01T00:00:00Z")
                // `to` left out: the end of the second now falls in, so a purchase of this very second counts.
                let started = Date()
                let latest = { GrantStore.wholeSecond(Date()).addingTimeInterval(1) }
                let sinceMarch = try await service.call("GET", "/v1/admin/reports/purchases?from=2026-03-01T00:00:00Z")
                #expect(sinceMarch.status == 200, "\(sinceMarch)")
                #expect(sinceMarch.object["from"] as? String == "2026-03-01T00:00:00Z")
                let now = try #require(RFC3339.date(from: sinceMarch.object["to"] as? String ?? ""))
                #expect(now > started && now <= latest())
                let lastMonth = try await service.call("GET", "/v1/admin/reports/purchases")
                #expect(lastMonth.status == 200, "\(lastMonth)")
                let from = try #require(RFC3339.date(from: lastMonth.object["from"] as? String ?? ""))
                let to = try #require(RFC3339.date(from: lastMonth.object["to"] as? String ?? ""))
                #expect(to > started && to <= latest())
                #expect(to.timeIntervalSince(from) == 30 * 86_400)
                let future = try await service.call("GET", "/v1/admin/reports/purchases?from=9999-01-01T00:00:00Z")
                #expect(future.status == 400, "\(future)")
                #expect(future.field == "from", "\(future)")
                let reversed = try await service.call("GET", "/v1/admin/reports/purchases?from=2026-04-01T00:00:00Z&to=2026-03-01T00:00:00Z")
                #expect(reversed.field == "to", "\(reversed)")

                // Fractions of a second are dropped from both ends: the window used is the one written.
                try await Self.insert(service, "f1", product: "com.example.premium.monthly", environment: "Production",
                                      purchased: "2026-05-01T00:00:05.000Z")
                try await Self.insert(service, "f2", product: "com.example.premium.monthly", environment: "Production",
                                      purchased: "2026-05-01T00:00:06.200Z")
                let fractional = try await service.call("GET", "/v1/admin/reports/purchases?from=2026-05-01T00:00:05.400Z&to=2026-05-01T00:00:06.500Z")
                #expect(fractional.status == 200, "\(fractional)")
                #expect(fractional.object["from"] as? String == "2026-05-01T00:00:05Z")
                #expect(fractional.object["to"] as? String == "2026-05-01T00:00:06Z")
                #expect((fractional.object["rows"] as? [[String: Any]])?.first?["count"] as? Int == 1, "\(fractional)")
            }
        }
    }
}
