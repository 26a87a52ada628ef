import EntitlementModel
import Foundation
import Testing
@testable import EntitlementService
@testable import ServiceRuntime

extension AdminTests {
    /// `GET /v1/admin/reports/timeseries` and the purchase report's CSV, over real HTTP on transactions written
    /// straight into the database.
    @Suite struct AdminTimeseriesReportTests {
        /// Inserts one transaction that expires at `expires` (nil: never).
        @Loop static func insert(_ service: AdminHarness, _ id: String, original: String? = nil, product: String, environment: String,
                                 purchased: String, expires: String? = nil, refunded: Bool = false,
                                 ownership: String = "purchased") async throws {
            _ = try await service.sql("""
                INSERT INTO app_store_transactions (transaction_id, original_transaction_id, product_id, environment, purchase_date,
                                                    expires_date, cancellation_date, ownership)
                VALUES ($1, $2, $3, $4, $5::timestamptz, $6::timestamptz, CASE WHEN $7 THEN $5::timestamptz + interval '1 hour' END, $8)
                """, [id, original ?? id, product, environment, purchased, expires, refunded, ownership])
        }

        static let monthly = "com.example.premium.monthly", coins = "com.example.coins.100"

        @Test @Loop func purchasesBucketByDayAndSubscriptionsCountAtEachBucketsEnd() async throws {
            try await AdminHarness.run { service in
                // One monthly subscription renewed once (one subscription, not two), one refunded, one in Sandbox.
                try await Self.insert(service, "1", product: Self.monthly, environment: "Production",
                                      purchased: "2026-03-01T10:00:00Z", expires: "2026-03-31T10:00:00Z")
                try await Self.insert(service, "2", original: "1", product: Self.monthly, environment: "Production",
                                      purchased: "2026-03-03T10:00:00Z", expires: "2026-04-02T10:00:00Z")
                try await Self.insert(service, "3", product: Self.monthly, environment: "Production",
                                      purchased: "2026-03-02T12:00:00Z", expires: "2026-04-01T12:00:00Z", refunded: true)
                try await Self.insert(service, "4", product: Self.monthly, environment: "Sandbox",
                                      purchased: "2026-03-02T00:00:00Z", expires: "2026-04-01T00:00:00Z")
                try await Self.insert(service, "5", product: Self.coins, environment: "Production", purchased: "2026-03-02T23:59:59Z")
                // A family member's copy of a subscription: neither a purchase nor a paying subscriber.
                try await Self.insert(service, "6", product: Self.monthly, environment: "Production",
                                      purchased: "2026-03-01T11:00:00Z", expires: "2026-03-31T11:00:00Z", ownership: "family_shared")

                let reply = try await service.call("GET", "/v1/admin/reports/timeseries?from=2026-03-01T00:00:00Z&to=2026-03-04T00:00:00Z&environment=Production")
                #expect(reply.status == 200, "\(reply)")
                #expect(reply.object["interval"] as? String == "day")
                #expect(reply.object["periods"] as? [String] == ["2026-03-01T00:00:00Z", "2026-03-02T00:00:00Z", "2026-03-03T00:00:00Z"])
                let points = (reply.object["points"] as? [[String: Any]] ?? []).map { point in
                    "\((point["period_start"] as? String ?? "?").prefix(10)) \(point["product_id"] as? String ?? "?") "
                        + "purchases=\(point["purchases"] as? Int ?? -1) refunded=\(point["refunded"] as? Int ?? -1) "
                        + "revenue=\(point["revenue"] as? String ?? "null")"
                }
                #expect(points == [
                    "2026-03-01 com.example.premium.monthly purchases=1 refunded=0 revenue=4.99",
                    "2026-03-02 com.example.coins.100 purchases=1 refunded=0 revenue=0.99",
                    "2026-03-02 com.example.premium.monthly purchases=1 refunded=1 revenue=0.00",
                    "2026-03-03 com.example.premium.monthly purchases=1 refunded=0 revenue=4.99",
                ])
                // At the end of each day: the subscription (and, on day 2 only, not the refunded one: refunded
                // an hour after purchase). A 30 days' period is a month: 4.99.
                let subscriptions = (reply.object["subscriptions"] as? [[String: Any]] ?? []).map { row in
                    "\((row["period_start"] as? String ?? "?").prefix(10)) \(row["environment"] as? String ?? "?") "
                        + "active=\(row["active_subscriptions"] as? Int ?? -1) mrr=\(row["mrr"] as? String ?? "null")"
                }
                #expect(subscriptions == [
                    "2026-03-01 Production active=1 mrr=4.99",
                    "2026-03-02 Production active=1 mrr=4.99",
                    "2026-03-03 Production active=1 mrr=4.99",
                ])

                let sandbox = try await service.call("GET", "/v1/admin/reports/timeseries?from=2026-03-01T00:00:00Z&to=2026-03-04T00:00:00Z&environment=Sandbox")
                #expect((sandbox.object["points"] as? [[String: Any]])?.map { $0["environment"] as? String } == ["Sandbox"])
                // Bought at the first day's start, live at the end of all three.
                #expect((sandbox.object["subscriptions"] as? [[String: Any]])?.count == 3, "\(sandbox)")

                let monthly = try await service.call("GET", "/v1/admin/reports/timeseries?from=2026-03-15T00:00:00Z&to=2026-05-01T00:00:00Z&interval=month")
                #expect(monthly.object["periods"] as? [String] == ["2026-03-01T00:00:00Z", "2026-04-01T00:00:00Z"], "\(monthly)")
                // At the end of March only the renewed Production subscription is live (Sandbox's expired at that
                // instant); at the end of April none is.
                #expect((monthly.object["subscriptions"] as? [[String: Any]])?.map { $0["environment"] as? String } == ["Production"], "\(monthly)")
            }
        }

        /// Subscriptions priced in different currencies are counted and estimated apart: yen are never added to
        /// dollars.
        @Test @Loop func subscriptionsInEachPriceCurrencyAreReportedApart() async throws {
            try await AdminHarness.run { service in
                let yen = #"{"type": "auto_renewable", "entitlements": ["premium"], "subscription_group": "group.premium", "price": "1200", "price_currency": "JPY"}"#
                let put = try await service.call("PUT", "/v1/admin/products/com.example.premium.yen", body: yen)
                #expect([200, 201].contains(put.status), "\(put)")
                try await Self.insert(service, "1", product: Self.monthly, environment: "Production",
                                      purchased: "2026-03-01T10:00:00Z", expires: "2026-03-31T10:00:00Z")
                try await Self.insert(service, "2", product: "com.example.premium.yen", environment: "Production",
                                      purchased: "2026-03-01T09:00:00Z", expires: "2026-03-31T09:00:00Z")
                // A year is twelve months; a week, under 27 days, is scaled to an average month (30.44 / 7).
                for (product, price, currency) in [("com.example.premium.annual", "47.88", "USD"), ("com.example.premium.weekly", "100", "JPY")] {
                    let body = #"{"type": "auto_renewable", "entitlements": ["premium"], "subscription_group": "group.premium", "price": "\#(price)", "price_currency": "\#(currency)"}"#
                    let put = try await service.call("PUT", "/v1/admin/products/\(product)", body: body)
                    #expect([200, 201].contains(put.status), "\(put)")
                }
                try await Self.insert(service, "3", product: "com.example.premium.annual", environment: "Production",
                                      purchased: "2026-02-01T00:00:00Z", expires: "2027-02-01T00:00:00Z")
                try await Self.insert(service, "4", product: "com.example.premium.weekly", environment: "Production",
                                      purchased: "2026-02-28T00:00:00Z", expires: "2026-03-07T00:00:00Z")
                let reply = try await service.call("GET", "/v1/admin/reports/timeseries?from=2026-03-01T00:00:00Z&to=2026-03-02T00:00:00Z")
                #expect(reply.status == 200, "\(reply)")
                let rows = (reply.object["subscriptions"] as? [[String: Any]] ?? []).map { row in
                    "\(row["price_currency"] as? String ?? "null") active=\(row["active_subscriptions"] as? Int ?? -1) mrr=\(row["mrr"] as? String ?? "null")"
                }
                // A 30-day period is a month: 1200 yen + 100 × 4.348 a week; 4.99 dollars + 47.88 / 12 a year.
                #expect(rows == ["JPY active=2 mrr=1634.81", "USD active=2 mrr=8.98"])
            }
        }

        @Test @Loop func theIntervalAndTheWindowAreChecked() async throws {
            try await AdminHarness.run { service in
                for (query, field) in [("interval=hour", "interval"), ("from=2020-01-01T00:00:00Z&to=2026-01-01T00:00:00Z", "interval"),
                                       ("environment=production", "environment"), ("from=2026-03-01T00:00:00Z&to=2026-03-01T00:00:00Z", "to")] {
                    let reply = try await service.call("GET", "/v1/admin/reports/timeseries?\(query)")
                    #expect(reply.status == 400, "\(query): \(reply)")
                    #expect(reply.field == field, "\(query): \(reply)")
                }
                let years = try await service.call("GET", "/v1/admin/reports/timeseries?from=2020-01-01T00:00:00Z&to=2026-01-01T00:00:00Z&interval=week")
                #expect(years.status == 200, "\(years)")
                #expect((years.object["periods"] as? [Any])?.count == 314, "\(years.object["periods"] ?? "")")
                #expect(try await service.call("GET", "/v1/admin/reports/timeseries", key: .app).status == 403)
                #expect(try await service.call("GET", "/v1/admin/reports/timeseries", key: .none).status == 401)
            }
        }

        @Test @Loop func thePurchaseReportDownloadsAsCSV() async throws {
            try await AdminHarness.run { service in
                try await Self.insert(service, "1", product: Self.monthly, environment: "Production", purchased: "2026-03-01T10:00:00Z")
                try await Self.insert(service, "2", product: "=cmd,\"x\"", environment: "Sandbox", purchased: "2026-03-01T10:00:00Z")
                let csv = try await service.call("GET", "/v1/admin/reports/purchases?from=2026-03-01T00:00:00Z&to=2026-04-01T00:00:00Z&format=csv")
                #expect(csv.status == 200)
                #expect(csv.contentType == "text/csv; charset=utf-8")
                #expect(csv.text == "product_id,environment,product_type,count,refunded,units,price,price_currency,revenue\r\n"
                    + "com.example.premium.monthly,Production,auto_renewable,1,0,1,4.99,USD,4.99\r\n"
                    + "\"'=cmd,\"\"x\"\"\",Sandbox,,1,0,1,,,\r\n")
                let json = try await service.call("GET", "/v1/admin/reports/purchases?format=json")
                #expect(json.contentType == "application/json")
                let wrong = try await service.call("GET", "/v1/admin/reports/purchases?format=xml")
                #expect(wrong.status == 400 && wrong.field == "format", "\(wrong)")
            }
        }
    }
}
