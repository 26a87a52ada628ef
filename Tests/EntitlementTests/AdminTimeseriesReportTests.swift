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
                                 ownership: String = "purchased", trial: Bool = false) async throws {
            _ = try await service.sql("""
                INSERT INTO app_store_transactions (transaction_id, original_transaction_id, product_id, environment, purchase_date,
                                                    expires_date, cancellation_date, ownership, is_trial_period)
                VALUES ($1, $2, $3, $4, $5::timestamptz, $6::timestamptz, CASE WHEN $7 THEN $5::timestamptz + interval '1 hour' END, $8, $9)
                """, [id, original ?? id, product, environment, purchased, expires, refunded, ownership, trial])
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

        /// A free trial is no sale and no paying subscriber: it counts as a trial, with no revenue and no MRR. A
        /// subscription in a billing grace period Apple granted past its expiry is still a paying subscriber.
        @Test @Loop func freeTrialsCountApartAndGracePeriodsCountAsActive() async throws {
            try await AdminHarness.run { service in
                // A 7-day free trial, then its first paid month.
                try await Self.insert(service, "1", product: Self.monthly, environment: "Production",
                                      purchased: "2026-03-01T10:00:00Z", expires: "2026-03-08T10:00:00Z", trial: true)
                try await Self.insert(service, "2", original: "1", product: Self.monthly, environment: "Production",
                                      purchased: "2026-03-08T10:00:00Z", expires: "2026-04-08T10:00:00Z")
                // A subscription that expired on March 5 with a grace period until March 10.
                try await Self.insert(service, "3", product: Self.monthly, environment: "Production",
                                      purchased: "2026-02-05T00:00:00Z", expires: "2026-03-05T00:00:00Z")
                _ = try await service.sql("""
                    INSERT INTO subscriptions (original_transaction_id, product_id, in_billing_retry, grace_period_expires_date, environment)
                    VALUES ('3', $1, true, '2026-03-10T00:00:00Z', 'Production')
                    """, [Self.monthly])
                let reply = try await service.call("GET", "/v1/admin/reports/timeseries?from=2026-03-01T00:00:00Z&to=2026-03-12T00:00:00Z&environment=Production")
                #expect(reply.status == 200, "\(reply)")
                let rows = (reply.object["subscriptions"] as? [[String: Any]] ?? []).map { row in
                    "\((row["period_start"] as? String ?? "?").prefix(10)) active=\(row["active_subscriptions"] as? Int ?? -1) "
                        + "trials=\(row["trials"] as? Int ?? -1) mrr=\(row["mrr"] as? String ?? "null")"
                }
                #expect(rows == (1...11).map { day in
                    let trials = day < 8 ? 1 : 0, active = (day < 9 ? 1 : 0) + (day >= 8 ? 1 : 0)
                    return String(format: "2026-03-%02d active=%d trials=%d mrr=%@", day, active, trials, String(format: "%.2f", 4.99 * Double(active)))
                })
                let trial = (reply.object["points"] as? [[String: Any]] ?? []).first { ($0["period_start"] as? String)?.hasPrefix("2026-03-01") == true }
                #expect(trial?["purchases"] as? Int == 1 && trial?["trials"] as? Int == 1 && trial?["revenue"] as? String == "0.00", "\(String(describing: trial))")
                let report = try await service.call("GET", "/v1/admin/reports/purchases?from=2026-03-01T00:00:00Z&to=2026-03-12T00:00:00Z")
                let row = (report.object["rows"] as? [[String: Any]])?.first
                #expect(row?["count"] as? Int == 2 && row?["trials"] as? Int == 1 && row?["revenue"] as? String == "4.99", "\(report)")
            }
        }

        /// The running sums against a direct count at every bucket's end: random subscriptions (renewals bought up to
        /// two hours early, some refunded partway), over day, week and month windows that start and end mid-bucket.
        @Test @Loop func runningSumsEqualADirectCountAtEveryBucketsEnd() async throws {
            try await AdminHarness.run { service in
                struct Segment { var starts: Date, ends: Date }
                var state: UInt64 = 0x2545_F491_4F6C_DD1D
                func random(_ range: ClosedRange<Double>) -> Double {  // xorshift: the same subscriptions every run
                    state ^= state << 13; state ^= state >> 7; state ^= state << 17
                    return range.lowerBound + Double(state % 1_000_000) / 1_000_000 * (range.upperBound - range.lowerBound)
                }
                let origin = try #require(RFC3339.date(from: "2026-01-01T00:00:00Z"))
                var segments: [Segment] = []
                for chain in 1...40 {
                    var purchased = origin.addingTimeInterval(random(0...200) * 86_400)
                    let renewals = Int(random(1...8))
                    var previous: (purchased: Date, ends: Date)?
                    for period in 0..<renewals {
                        let expires = purchased.addingTimeInterval(random(28...31) * 86_400)
                        let cancelled = random(0...1) < 0.15 ? purchased.addingTimeInterval(random(0...27) * 86_400) : nil
                        if let previous { segments.append(Segment(starts: previous.purchased, ends: min(previous.ends, purchased))) }
                        _ = try await service.sql("""
                            INSERT INTO app_store_transactions (transaction_id, original_transaction_id, product_id, environment,
                                                                purchase_date, expires_date, cancellation_date)
                            VALUES ($1, $2, $3, 'Production', $4, $5, $6)
                            """, ["r\(chain)-\(period)", "r\(chain)-0", Self.monthly, purchased, expires, cancelled])
                        previous = (purchased, min(expires, cancelled ?? expires))
                        purchased = expires.addingTimeInterval(-random(0...7_200))
                    }
                    if let previous { segments.append(Segment(starts: previous.purchased, ends: previous.ends)) }
                }
                for (interval, from, to) in [("day", "2026-02-10T07:30:00Z", "2026-03-25T12:00:00Z"), ("week", "2026-01-20T00:00:00Z", "2026-06-03T05:00:00Z"),
                                             ("month", "2026-01-15T00:00:00Z", "2026-09-10T00:00:00Z")] {
                    let reply = try await service.call("GET", "/v1/admin/reports/timeseries?interval=\(interval)&from=\(from)&to=\(to)")
                    #expect(reply.status == 200, "\(reply)")
                    let starts = try (reply.object["periods"] as? [String] ?? []).map { try #require(RFC3339.date(from: $0)) }
                    let ends = starts.dropFirst() + [try #require(RFC3339.date(from: to))]
                    let counted = Dictionary(uniqueKeysWithValues: (reply.object["subscriptions"] as? [[String: Any]] ?? []).map {
                        ($0["period_start"] as? String ?? "?", $0["active_subscriptions"] as? Int ?? -1)
                    })
                    let expected = zip(starts, ends).map { start, end in
                        (RFC3339.string(from: start), segments.filter { $0.starts <= end && end < $0.ends }.count)
                    }
                    #expect(expected.contains { $0.1 > 0 }, "\(interval): nothing live to count")
                    for (start, count) in expected {
                        #expect((counted[start] ?? 0) == count, "\(interval) \(start): counted \(counted[start] ?? 0), live \(count)")
                    }
                }
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
                // At most 398 buckets, counted as the report makes them: 398 days from midnight are answered, 399
                // are not, nor 398 days that start mid-day (399 buckets).
                for (window, status, buckets) in [("from=2024-01-01T00:00:00Z&to=2025-02-02T00:00:00Z", 200, 398),
                                                  ("from=2024-01-01T00:00:00Z&to=2025-02-03T00:00:00Z", 400, 0),
                                                  ("from=2024-01-01T12:00:00Z&to=2025-02-02T12:00:00Z", 400, 0)] {
                    let reply = try await service.call("GET", "/v1/admin/reports/timeseries?interval=day&\(window)")
                    #expect(reply.status == status, "\(window): \(reply)")
                    if status == 200 { #expect((reply.object["periods"] as? [Any])?.count == buckets, "\(window)") }
                }
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
                #expect(csv.text == "product_id,environment,product_type,count,refunded,units,price,price_currency,revenue,trials\r\n"
                    + "com.example.premium.monthly,Production,auto_renewable,1,0,1,4.99,USD,4.99,0\r\n"
                    + "\"'=cmd,\"\"x\"\"\",Sandbox,,1,0,1,,,,0\r\n")
                let json = try await service.call("GET", "/v1/admin/reports/purchases?format=json")
                #expect(json.contentType == "application/json")
                let wrong = try await service.call("GET", "/v1/admin/reports/purchases?format=xml")
                #expect(wrong.status == 400 && wrong.field == "format", "\(wrong)")
            }
        }
    }
}
