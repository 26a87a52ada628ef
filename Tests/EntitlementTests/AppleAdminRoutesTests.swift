import EntitlementModel
import Foundation
import Testing
@testable import EntitlementService
@testable import ServiceRuntime

/// `POST /v1/admin/users/{user_id}/apple-orders` and `/refresh` end to end: the service, PostgreSQL and the
/// fake App Store's Server API over HTTP.
@Suite(.serialized) struct AppleAdminRoutesTests {
    static let admin = ServiceHarness.adminKey

    @Test @Loop func anOrderIDAttachesThePurchaseToTheUser() async throws {
        try await ServiceHarness.run(serverAPI: true) { service in
            // A Sandbox order: Production answers status 1, Sandbox knows it.
            let bought = try await service.fakeBuy(["product_id": "com.example.lifetime", "type": "non_consumable", "customer": "alice"])
            let order = try #require(bought["order_id"] as? String)
            let body = "{\"order_id\": \"\(order)\"}"
            #expect(try await service.request("POST", "/v1/admin/users/u1/apple-orders", json: body).status == 403)
            let attached = try await service.request("POST", "/v1/admin/users/u1/apple-orders", json: body, key: Self.admin)
            #expect(attached.status == 200, "\(attached.text)")
            let document = try attached.json()
            #expect(document["user_id"] as? String == "u1")
            #expect(document.entitlement("pro")?["active"] as? Bool == true)
            #expect(document.entitlement("pro")?["environment"] as? String == "Sandbox")
            #expect(try await service.entitlements("u1").entitlement("pro")?["active"] as? Bool == true)
            // The same order again counts once; another user takes it over (RESTORE_POLICY=transfer), audited.
            #expect(try await service.request("POST", "/v1/admin/users/u1/apple-orders", json: body, key: Self.admin).status == 200)
            #expect(try await service.sql("SELECT 1 FROM app_store_transactions").count == 1)
            let other = try await service.request("POST", "/v1/admin/users/u2/apple-orders", json: body, key: Self.admin)
            #expect(try other.status == 200 && other.json()["transferred_from"] as? String == "u1")
            #expect(try await service.entitlements("u1").entitlement("pro")?["active"] as? Bool != true)
            #expect(try await service.sql("SELECT 1 FROM audit_events WHERE action = 'ownership.transfer'").count == 1)
            // Each attachment is an admin action of its own in the audit log, with the key id and what was recorded.
            let attachments = try await service.sql("""
                SELECT actor, subject, user_id, after->>'environment' AS environment, after->'transaction_ids' ->> 0 AS first
                  FROM audit_events WHERE action = 'apple_order.attach' ORDER BY occurred_at, event_id
                """)
            #expect(try attachments.map { try $0.string("user_id") } == ["u1", "u1", "u2"])
            #expect(try attachments.allSatisfy { try $0.string("subject") == order && $0.string("environment") == "Sandbox" && !$0.string("first").isEmpty })
            #expect(try attachments.allSatisfy { try $0.string("actor").hasPrefix("admin") }, "a key id, never the key")

            let unknown = try await service.request("POST", "/v1/admin/users/u1/apple-orders", json: #"{"order_id": "MZZZZZZZZZ"}"#, key: Self.admin)
            #expect(try unknown.status == 404 && unknown.json()["field"] as? String == "order_id")
            let invalid = try await service.request("POST", "/v1/admin/users/u1/apple-orders", json: #"{"order_id": "bad id"}"#, key: Self.admin)
            #expect(try invalid.status == 400 && invalid.json()["field"] as? String == "order_id")
        }
    }

    @Test @Loop func withoutAKeyBothAnswer501() async throws {
        try await ServiceHarness.run { service in
            let order = try await service.request("POST", "/v1/admin/users/u1/apple-orders", json: #"{"order_id": "MABCDEF"}"#, key: Self.admin)
            #expect(order.status == 501)
            #expect(try await service.request("POST", "/v1/admin/users/u1/refresh", key: Self.admin).status == 501)
        }
    }

    @Test @Loop func refreshReadsRenewalsRefundsAndUpgradesFromApple() async throws {
        try await ServiceHarness.run(serverAPI: true) { service in
            let bought = try await service.fakeBuy(["product_id": "com.example.premium.monthly", "type": "auto_renewable", "customer": "bob",
                                                    "environment": "Production"])
            let order = try #require(bought["order_id"] as? String)
            let original = try #require(bought["original_transaction_id"] as? String)
            let attached = try await service.request("POST", "/v1/admin/users/u3/apple-orders", json: "{\"order_id\": \"\(order)\"}", key: Self.admin)
            #expect(attached.status == 200, "\(attached.text)")
            let firstExpiry = try #require(try attached.json().entitlement("premium")?["expires_at"] as? String)

            let now = Int(Date().timeIntervalSince1970 * 1_000)
            try await service.fakeChange(original, "renew", ["purchase_date": .int(now - 1_000), "expires_date": .int(now + 40 * 86_400_000)])
            let renewed = try await service.request("POST", "/v1/admin/users/u3/refresh", key: Self.admin)
            #expect(renewed.status == 200, "\(renewed.text)")
            let premium = try renewed.json().entitlement("premium")
            #expect(premium?["active"] as? Bool == true && (premium?["expires_at"] as? String ?? "") > firstExpiry)
            #expect(try await service.sql("SELECT 1 FROM app_store_transactions").count == 2)

            try await service.fakeChange(original, "refund")
            try await service.fakeChange(original, "refund", ["transaction_id": .string(original)])
            let refunded = try await service.request("POST", "/v1/admin/users/u3/refresh", key: Self.admin).json()
            #expect(refunded.entitlement("premium")?["active"] as? Bool == false)
            #expect(refunded.entitlement("premium")?["inactive_reason"] as? String == "refunded")
        }
    }

    @Test @Loop func aCustomersPurchasesAreReadThroughOneHistory() async throws {
        try await ServiceHarness.run(serverAPI: true) { service in
            // Three purchases (three chains) of one customer: the history of the first lists all three.
            for _ in 0..<3 {
                let bought = try await service.fakeBuy(["product_id": "com.example.coins.100", "type": "consumable", "customer": "erin"])
                let order = try #require(bought["order_id"] as? String)
                let attached = try await service.request("POST", "/v1/admin/users/u7/apple-orders", json: "{\"order_id\": \"\(order)\"}", key: Self.admin)
                #expect(attached.status == 200, "\(attached.text)")
            }
            let before = try await Self.historyRequests(service)
            let refreshed = try await service.request("POST", "/v1/admin/users/u7/refresh", key: Self.admin)
            #expect(refreshed.status == 200, "\(refreshed.text)")
            #expect(try await Self.historyRequests(service) == before + 1)
            #expect(try await service.sql("SELECT 1 FROM app_store_transactions").count == 3)
        }
    }

    /// Get Transaction History requests the fake has received, both environments together.
    @Loop private static func historyRequests(_ service: ServiceHarness) async throws -> Int {
        let counts = try await service.fakeCall("GET", "/control/server-api/requests").json()["counts"] as? [String: Int] ?? [:]
        return counts.filter { $0.key.hasPrefix("transaction_history.") }.values.reduce(0, +)
    }

    @Test @Loop func anUnavailableAppleAnswers503AndChangesNothing() async throws {
        try await ServiceHarness.run(serverAPI: true) { service in
            let bought = try await service.fakeBuy(["product_id": "com.example.lifetime", "type": "non_consumable", "customer": "carol"])
            let order = try #require(bought["order_id"] as? String)
            #expect(try await service.fakeCall("PUT", "/control/server-api/config", ["outage": true]).status == 200)
            let down = try await service.request("POST", "/v1/admin/users/u4/apple-orders?wait_ms=300", json: "{\"order_id\": \"\(order)\"}", key: Self.admin)
            #expect(down.status == 503, "\(down.text)")
            #expect(Int(down.headers["Retry-After"] ?? "") ?? 0 >= 1)
            #expect(try await service.request("POST", "/v1/admin/users/u4/refresh?wait_ms=300", key: Self.admin).status == 200)  // owns nothing yet
            #expect(try await service.sql("SELECT 1 FROM app_store_transactions").isEmpty)

            // A 429 whose Retry-After is beyond the wait is 503 too.
            #expect(try await service.fakeCall("PUT", "/control/server-api/config", ["outage": false]).status == 200)
            #expect(try await service.fakeCall("POST", "/control/server-api/scenarios", [
                "endpoint": "order_lookup", "steps": [["status": 429, "retry_after_ms": 5_000]],
            ]).status == 201)
            let limited = try await service.request("POST", "/v1/admin/users/u4/apple-orders?wait_ms=500", json: "{\"order_id\": \"\(order)\"}", key: Self.admin)
            #expect(limited.status == 503 && Int(limited.headers["Retry-After"] ?? "") ?? 0 >= 4, "\(limited.text)")
            #expect(try await service.sql("SELECT 1 FROM app_store_transactions").isEmpty)
            // Apple back: the same order attaches.
            #expect(try await service.request("POST", "/v1/admin/users/u4/apple-orders", json: "{\"order_id\": \"\(order)\"}", key: Self.admin).status == 200)

            // No time to wait (`wait_ms=0`): both calls answer 503 at once, and Apple is not asked.
            let asked = try await service.fakeCall("GET", "/control/server-api/requests").json()["counts"] as? [String: Int] ?? [:]
            let noWait = try await service.request("POST", "/v1/admin/users/u4/apple-orders?wait_ms=0", json: "{\"order_id\": \"\(order)\"}", key: Self.admin)
            #expect(noWait.status == 503, "\(noWait.text)")
            let refreshNoWait = try await service.request("POST", "/v1/admin/users/u4/refresh?wait_ms=0", key: Self.admin)
            #expect(refreshNoWait.status == 503, "\(refreshNoWait.text)")
            #expect(try await service.fakeCall("GET", "/control/server-api/requests").json()["counts"] as? [String: Int] ?? [:] == asked)
        }
    }

    @Test @Loop func aKeyBothEnvironmentsRefuseIs502() async throws {
        try await ServiceHarness.run(["APPLE_KEY_ID": "OTHERKEY01"], serverAPI: true) { service in
            let answer = try await service.request("POST", "/v1/admin/users/u5/apple-orders", json: #"{"order_id": "MABCDEF"}"#, key: Self.admin)
            #expect(answer.status == 502, "\(answer.text)")
            #expect(try answer.json()["apple_status"] as? Int == 401)
        }
    }
}
