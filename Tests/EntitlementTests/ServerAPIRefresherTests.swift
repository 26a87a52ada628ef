import EntitlementModel
import Foundation
import Testing
@testable import EntitlementService
@testable import ServiceRuntime

/// The renewal refresher with an App Store Server API key: a subscription recorded without a receipt (here by
/// its order ID) follows what happens at the fake through Get All Subscription Statuses, with no receipt and
/// no notification.
@Suite(.serialized) struct ServerAPIRefresherTests {
    @Test @Loop func renewalsAndRenewalInfoReachEntitlementsWithoutAReceipt() async throws {
        try await ServiceHarness.run(serverAPI: true) { service in
            let bought = try await service.fakeBuy(["product_id": "com.example.premium.monthly", "type": "auto_renewable", "customer": "dave",
                                                    "environment": "Production"])
            let order = try #require(bought["order_id"] as? String)
            let original = try #require(bought["original_transaction_id"] as? String)
            let attached = try await service.request("POST", "/v1/admin/users/u6/apple-orders", json: "{\"order_id\": \"\(order)\"}",
                                                     key: ServiceHarness.adminKey)
            #expect(attached.status == 200, "\(attached.text)")
            #expect(try await service.sql("SELECT 1 FROM subscriptions WHERE latest_receipt IS NULL").count == 1)
            let firstExpiry = try #require(try attached.json().entitlement("premium")?["expires_at"] as? String)

            /// Makes the subscription due now (as time passing would), then waits for `condition` on the
            /// entitlement the refresher records.
            func refreshed(_ condition: @Sendable ([String: Any]?) -> Bool) async throws -> Bool {
                _ = try await service.sql("UPDATE subscriptions SET next_refresh_at = now()")
                let deadline = RawHTTPClient.now() + 20
                while RawHTTPClient.now() < deadline {
                    if condition(try await service.entitlements("u6").entitlement("premium")) { return true }
                    await LoopTimer.sleep(milliseconds: 100)
                }
                return false
            }

            let now = Int(Date().timeIntervalSince1970 * 1_000)
            try await service.fakeChange(original, "renew", ["purchase_date": .int(now - 1_000), "expires_date": .int(now + 40 * 86_400_000)])
            #expect(try await refreshed { ($0?["expires_at"] as? String ?? "") > firstExpiry })

            try await service.fakeChange(original, "auto_renew_off")
            #expect(try await refreshed { $0?["will_renew"] as? Bool == false })

            #expect(try await service.fakeCall("GET", "/control/server-api/requests").text.contains("subscription_statuses"))
        }
    }

    @Test @Loop func anOutageDefersTheRefreshAndLosesNothing() async throws {
        try await ServiceHarness.run(serverAPI: true) { service in
            let bought = try await service.fakeBuy(["product_id": "com.example.premium.monthly", "type": "auto_renewable", "customer": "erin",
                                                    "environment": "Production"])
            let order = try #require(bought["order_id"] as? String)
            let original = try #require(bought["original_transaction_id"] as? String)
            #expect(try await service.request("POST", "/v1/admin/users/u7/apple-orders", json: "{\"order_id\": \"\(order)\"}",
                                              key: ServiceHarness.adminKey).status == 200)
            _ = try await service.sql("UPDATE subscriptions SET next_refresh_at = now()")
            #expect(try await eventually(timeout: 20, everyMs: 100) {
                try await service.entitlements("u7").entitlement("premium")?["will_renew"] as? Bool == true
            })
            try await service.fakeChange(original, "auto_renew_off")
            #expect(try await service.fakeCall("PUT", "/control/server-api/config", ["outage": true]).status == 200)
            _ = try await service.sql("UPDATE subscriptions SET next_refresh_at = now()")
            // The refresher tries, fails and puts the row off to later.
            #expect(try await eventually(timeout: 20, everyMs: 100) {
                try await service.sql("SELECT 1 FROM subscriptions WHERE next_refresh_at > now() AND refresh_attempts >= 1").count == 1
            })
            #expect(try await service.entitlements("u7").entitlement("premium")?["will_renew"] as? Bool == true)
            #expect(try await service.fakeCall("PUT", "/control/server-api/config", ["outage": false]).status == 200)
            _ = try await service.sql("UPDATE subscriptions SET next_refresh_at = now()")
            #expect(try await eventually(timeout: 20, everyMs: 100) {
                try await service.entitlements("u7").entitlement("premium")?["will_renew"] as? Bool == false
            })
            #expect(try await service.sql("SELECT 1 FROM app_store_transactions").count == 1)
        }
    }
}
