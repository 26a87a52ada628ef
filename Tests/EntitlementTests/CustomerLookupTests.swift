import EntitlementModel
import Foundation
import Testing
@testable import EntitlementService
@testable import FakeAppStore
@testable import ServiceRuntime

/// `GET /v1/admin/lookup` (a customer by original transaction id, transaction id, server order id or app account
/// token) and `GET /v1/admin/capabilities`, end to end: the service on loopback, PostgreSQL, the fake App Store.
@Suite(.serialized, .timeLimit(.minutes(3)))
struct CustomerLookupTests {
    @Test @Loop func eachKeyFindsItsCustomer() async throws {
        try await AdminHarness.run { service in
            let buyer = "buyer <img src=x>"
            var receipt = FakeReceipt(bundleID: AdminHarness.bundleID)
            let periods = receipt.addSubscription("com.example.premium.monthly", originalTransactionID: "8300001",
                                                  start: Date().addingTimeInterval(-40 * 86_400), period: try ISODuration(parsing: "P1M"), periods: 2)
            #expect(try await service.post(receipt, for: buyer).status == 200)
            let renewal = try #require(periods.last?.transactionID)
            #expect(renewal != "8300001")
            let order = try await service.call("POST", "/v1/orders", key: .app,
                                               body: AdminHarness.json(["user_id": "orderer", "product_id": "com.example.lifetime"])).object
            let orderID = try #require(order["order_id"] as? String)
            let orderToken = try #require(order["app_account_token"] as? String)
            let token = try #require(try await service.call("GET", "/v1/users/tokened/app-account-token", key: .app).object["app_account_token"] as? String)

            func user(_ query: String) async throws -> String? {
                let reply = try await service.call("GET", "/v1/admin/lookup?" + query)
                #expect(reply.status == 200, "\(query): \(reply)")
                return reply.object["user_id"] as? String
            }
            #expect(try await user("original_transaction_id=8300001") == buyer)
            #expect(try await user("transaction_id=\(renewal)") == buyer)
            #expect(try await user("order_id=\(orderID)") == "orderer")
            #expect(try await user("order_id=\(orderID.uppercased())") == "orderer")
            #expect(try await user("app_account_token=\(orderToken)") == "orderer")
            #expect(try await user("app_account_token=\(token)") == "tokened")

            // Unknown: 404 naming the field.
            for query in ["original_transaction_id=9999999", "transaction_id=9999999", "order_id=\(UUID().uuidString)",
                          "app_account_token=\(UUID().uuidString)"] {
                let reply = try await service.call("GET", "/v1/admin/lookup?" + query)
                #expect(reply.status == 404 && reply.field == String(query.prefix { $0 != "=" }), "\(query): \(reply)")
                #expect(reply.contentType == "application/problem+json")
            }
            // None, two, or a malformed value: 400 naming the field.
            for (query, field) in [("", "original_transaction_id"), ("order_id=\(orderID)&transaction_id=1", "order_id"),
                                   ("order_id=42", "order_id"), ("app_account_token=x", "app_account_token"),
                                   ("transaction_id=a%20b", "transaction_id"), ("original_transaction_id=", "original_transaction_id"),
                                   ("original_transaction_id=" + String(repeating: "1", count: 65), "original_transaction_id")] {
                let reply = try await service.call("GET", "/v1/admin/lookup?" + query)
                #expect(reply.status == 400 && reply.field == field, "\(query): \(reply)")
            }
            #expect(try await service.call("GET", "/v1/admin/lookup?original_transaction_id=8300001", key: .app).status == 403)
            #expect(try await service.call("GET", "/v1/admin/lookup?original_transaction_id=8300001", key: .none).status == 401)
        }
    }

    @Test @Loop func capabilitiesSayWhatTheConfigurationEnables() async throws {
        try await AdminHarness.run { service in
            let reply = try await service.call("GET", "/v1/admin/capabilities")
            #expect(reply.status == 200)
            #expect(reply.object["app_store_server_api"] as? Bool == false && reply.object["webhooks"] as? Bool == false, "\(reply)")
            #expect(try await service.call("GET", "/v1/admin/capabilities", key: .app).status == 403)
        }
        let secret = "whsec_" + Data(repeating: 7, count: 32).base64EncodedString()
        try await ServiceHarness.run(["WEBHOOK_URL": "http://127.0.0.1:9/hook", "WEBHOOK_SECRET": secret], serverAPI: true) { service in
            let reply = try await service.request("GET", "/v1/admin/capabilities", key: ServiceHarness.adminKey)
            #expect(reply.status == 200)
            let body = try reply.json()
            #expect(body["app_store_server_api"] as? Bool == true && body["webhooks"] as? Bool == true, "\(reply.text)")
        }
    }
}
