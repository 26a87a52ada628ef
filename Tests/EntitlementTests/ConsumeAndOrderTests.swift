import EntitlementModel
import Foundation
import Testing
@testable import AppStore
@testable import EntitlementService
@testable import FakeAppStore
@testable import ServiceRuntime

/// End to end against the real service and PostgreSQL: spending consumables (the same idempotency key spends
/// once, a short balance is refused) and fulfilling an order named by the receipt's poster.
@Suite(.serialized, .timeLimit(.minutes(3)))
@Loop
struct ConsumeAndOrderTests {
    let now = Date()

    /// Credits 100 coins to `user` through a verified receipt.
    private func credit(_ service: ServiceHarness, _ user: String, transactionID: String) async throws {
        var receipt = FakeReceipt(bundleID: ServiceHarness.bundleID)
        receipt.addPurchase("com.example.coins.100", transactionID: transactionID, purchased: now.addingTimeInterval(-60))
        #expect(try await service.post(receipt, for: user).status == 200)
    }

    private nonisolated func consume(_ service: ServiceHarness, _ user: String, amount: Int, key: String) async throws -> RawHTTPClient.Response {
        try await service.request("POST", "/v1/users/\(user)/consumables/coins/consume",
                                  json: #"{"amount": \#(amount), "idempotency_key": "\#(key)"}"#)
    }

    @Test func theSameKeySpendsOnceAndAShortBalanceIsRefused() async throws {
        try await ServiceHarness.run { service in
            try await credit(service, "spender", transactionID: "spend-1")
            let first = try await consume(service, "spender", amount: 30, key: "k1")
            #expect(first.status == 200, "\(first.text)")
            #expect(try first.json()["balance"] as? Int == 70)
            let again = try await consume(service, "spender", amount: 30, key: "k1")
            #expect(again.status == 200)
            #expect(try again.json()["balance"] as? Int == 70)

            // The same key for another amount is not the same spend: refused, naming the key, nothing spent.
            let reused = try await consume(service, "spender", amount: 31, key: "k1")
            #expect(reused.status == 422, "\(reused.text)")
            #expect(try reused.json()["field"] as? String == "idempotency_key")
            #expect(try await consume(service, "spender", amount: 30, key: "k1").json()["balance"] as? Int == 70)

            let short = try await consume(service, "spender", amount: 71, key: "k2")
            #expect(short.status == 409)
            #expect(short.headers["Content-Type"] == "application/problem+json")
            #expect(try short.json()["balance"] as? Int == 70)
            let ledger = try await service.sql("SELECT count(*)::int AS n FROM consumable_ledger WHERE user_id = 'spender' AND kind = 'consume'")
            #expect(try ledger.first?.int("n") == 1)
        }
    }

    /// Every amount that is no integer from 1 to 10^12 (what one purchase may credit) is a 400 naming `amount`,
    /// among them numbers Foundation's decoder reports as invalid JSON (a fraction, one beyond 64 bits).
    @Test func anAmountThatIsNoPositiveIntegerIsRefusedNamingIt() async throws {
        try await ServiceHarness.run { service in
            for amount in ["1.5", "2.5e0", "12345678901234567890", "1000000000001", "0", "-5", "true", #""5""#, "null"] {
                let answer = try await service.request("POST", "/v1/users/spender/consumables/coins/consume",
                                                       json: #"{"amount": \#(amount), "idempotency_key": "k"}"#)
                #expect(answer.status == 400, "\(amount): \(answer.text)")
                #expect(try answer.json()["field"] as? String == "amount", "\(amount): \(answer.text)")
            }
            // Up to 10^12 is a spend: here one the balance cannot cover.
            let large = try await service.request("POST", "/v1/users/spender/consumables/coins/consume",
                                                  json: #"{"amount": 1000000000000, "idempotency_key": "k"}"#)
            #expect(large.status == 409, "\(large.text)")
            let broken = try await service.request("POST", "/v1/users/spender/consumables/coins/consume", json: #"{"amount": 1"#)
            #expect(broken.status == 400)
            #expect(try broken.json()["field"] == nil)
        }
    }

    @Test func twentyConcurrentConsumesWithOneKeySpendOnceAndDifferentKeysNeverOverdraw() async throws {
        try await ServiceHarness.run { service in
            try await credit(service, "racer", transactionID: "race-1")
            let sameKey = (0..<20).map { _ in Task { try await consume(service, "racer", amount: 10, key: "once") } }
            var balances: Set<Int> = []
            for task in sameKey {
                let answer = try await task.value
                #expect(answer.status == 200, "\(answer.text)")
                if let balance = try answer.json()["balance"] as? Int { balances.insert(balance) }
            }
            #expect(balances == [90])

            let distinct = (0..<20).map { index in Task { try await consume(service, "racer", amount: 10, key: "k\(index)").status } }
            var statuses: [Int] = []
            for task in distinct { statuses.append(try await task.value) }
            #expect(statuses.filter { $0 == 200 }.count == 9)
            #expect(statuses.filter { $0 == 409 }.count == 11)
            let balance = try await service.sql("SELECT balance FROM consumable_balances WHERE user_id = 'racer' AND currency = 'coins'")
            #expect(try balance.first?.int("balance") == 0)
        }
    }

    @Test func aReceiptPostedWithAnOrderIDFulfilsThatOrder() async throws {
        try await ServiceHarness.run { service in
            let created = try await service.request("POST", "/v1/orders", json: #"{"user_id": "orderer", "product_id": "com.example.lifetime"}"#)
            #expect(created.status == 201, "\(created.text)")
            let orderID = try #require(try created.json()["order_id"] as? String)
            var receipt = FakeReceipt(bundleID: ServiceHarness.bundleID)
            receipt.addPurchase("com.example.lifetime", transactionID: "by-order-1", purchased: now.addingTimeInterval(-30))
            #expect(try await service.post(receipt, for: "orderer", orderID: orderID).status == 200)
            let order = try await service.request("GET", "/v1/orders/\(orderID)").json()
            #expect(order["status"] as? String == "fulfilled")
            #expect(order["transaction_id"] as? String == "by-order-1")
            // An id no order has, a UUID or not, is unknown alike.
            for id in [UUID().uuidString, "does-not-exist"] {
                let unknown = try await service.request("GET", "/v1/orders/\(id)")
                let field = try unknown.json()["field"] as? String
                #expect(unknown.status == 404 && field == "order_id", "\(id): \(unknown)")
            }
        }
    }
}
