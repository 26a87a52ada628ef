import EntitlementModel
import Foundation
import Testing
@testable import EntitlementService
@testable import ServiceRuntime

/// The renewal refresher with an App Store Server API key: a subscription recorded without a receipt (here by
/// its order ID) follows what happens at the fake through Get All Subscription Statuses, with no receipt and
/// no notification.
@Suite(.serialized) struct ServerAPIRefresherTests {
    /// Makes every subscription due now (as time passing would), then waits for `condition` on the premium
    /// entitlement of `userID` the refresher records.
    @Loop static func refreshed(_ service: ServiceHarness, _ userID: String, _ condition: @Sendable ([String: Any]?) -> Bool) async throws -> Bool {
        _ = try await service.sql("UPDATE subscriptions SET next_refresh_at = now()")
        return try await eventually(timeout: 20, everyMs: 100) { condition(try await service.entitlements(userID).entitlement("premium")) }
    }

    /// Attaches the fake's purchase `bought` to `userID` by its order ID; its original transaction id.
    @Loop static func attach(_ bought: [String: Any], to userID: String, _ service: ServiceHarness) async throws -> String {
        let order = try #require(bought["order_id"] as? String)
        let attached = try await service.request("POST", "/v1/admin/users/\(userID)/apple-orders", json: "{\"order_id\": \"\(order)\"}",
                                                 key: ServiceHarness.adminKey)
        #expect(attached.status == 200, "\(attached.text)")
        return try #require(bought["original_transaction_id"] as? String)
    }

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

            func refreshed(_ condition: @Sendable ([String: Any]?) -> Bool) async throws -> Bool {
                try await Self.refreshed(service, "u6", condition)
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

    @Test @Loop func billingRetryGraceRecoveryUpgradeAndRefundReachEntitlementsWithoutAReceipt() async throws {
        try await ServiceHarness.run(serverAPI: true) { service in
            let monthly = try await service.fakeBuy(["product_id": "com.example.premium.monthly", "type": "auto_renewable", "customer": "fay",
                                                     "environment": "Production"])
            let original = try await Self.attach(monthly, to: "u8", service)

            try await service.fakeChange(original, "billing_retry")
            #expect(try await Self.refreshed(service, "u8") { $0?["active"] as? Bool == false && $0?["in_billing_retry"] as? Bool == true })

            try await service.fakeChange(original, "grace_period")
            #expect(try await Self.refreshed(service, "u8") { $0?["active"] as? Bool == true && $0?["in_grace_period"] as? Bool == true })

            try await service.fakeChange(original, "renew")
            #expect(try await Self.refreshed(service, "u8") {
                $0?["active"] as? Bool == true && $0?["in_grace_period"] as? Bool == false && $0?["in_billing_retry"] as? Bool == false
            })

            try await service.fakeChange(original, "upgrade", ["product_id": "com.example.premium.yearly"])
            #expect(try await Self.refreshed(service, "u8") {
                $0?["active"] as? Bool == true && $0?["product_id"] as? String == "com.example.premium.yearly"
            })

            // Another customer's subscription, refunded.
            let refunded = try await service.fakeBuy(["product_id": "com.example.premium.monthly", "type": "auto_renewable", "customer": "gus",
                                                      "environment": "Production"])
            let refundedOriginal = try await Self.attach(refunded, to: "u9", service)
            try await service.fakeChange(refundedOriginal, "refund")
            #expect(try await Self.refreshed(service, "u9") { $0?["active"] as? Bool == false && $0?["inactive_reason"] as? String == "refunded" })

            // Apple's answers alone: no receipt, no notification.
            #expect(try await service.sql("SELECT 1 FROM receipt_submissions").isEmpty)
            #expect(try await service.sql("SELECT 1 FROM app_store_notifications").isEmpty)
            #expect(try await service.sql("SELECT 1 FROM subscriptions WHERE latest_receipt IS NULL").count == 2)
        }
    }
}
