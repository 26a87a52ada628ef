import EntitlementModel
import Foundation
import Testing
@testable import AppStore
@testable import EntitlementService
@testable import FakeAppStore
@testable import ServiceRuntime

/// The renewal refresher's pass: it claims the subscriptions whose refresh is due, re-verifies each one's
/// latest receipt for its owner, and records the answer (a renewal), stops (a rejection) or defers (Apple
/// could not answer).
@Suite(.serialized, .timeLimit(.minutes(2)))
@Loop
struct RenewalRefresherTests {
    let now = Date()
    let month = try! ISODuration(parsing: "P1M")

    /// A monthly subscription bought two months ago whose first period the service has seen, posted by
    /// `refresh-user`; returns the receipt and the service.
    private func subscribed(_ stack: PurchaseStack, _ apple: ScriptedVerifier) async throws -> (FakeReceipt, ReceiptService) {
        let service = stack.service(apple)
        var receipt = FakeReceipt(bundleID: ServiceHarness.bundleID)
        receipt.addSubscription("com.example.premium.monthly", originalTransactionID: "refresh-1",
                                start: now.addingTimeInterval(-61 * 86_400), period: month)
        apple.enqueue(try receipt.verified())
        let (_, outcome) = try await service.submit(userID: "refresh-user", receiptData: receipt.receiptData, orderID: nil,
                                                    waitMs: 30_000, actor: "test")
        guard case .verified? = outcome else { throw TestSetupError("the purchase was not verified: \(String(describing: outcome))") }
        return (receipt, service)
    }

    private func makeDue(_ stack: PurchaseStack) async throws {
        _ = try await stack.sql("UPDATE subscriptions SET next_refresh_at = now() - interval '1 second'")
    }

    private func subscription(_ stack: PurchaseStack) async throws -> PostgresRow {
        try #require(try await stack.sql("""
            SELECT latest_expires_date, next_refresh_at, next_refresh_at > now() AS later, refresh_attempts, latest_receipt
              FROM subscriptions WHERE original_transaction_id = 'refresh-1'
            """).first)
    }

    @Test func aDueSubscriptionIsReverifiedAndItsRenewalRecorded() async throws {
        try await PurchaseStack.run { stack in
            let apple = ScriptedVerifier()
            let (receipt, service) = try await subscribed(stack, apple)
            let expired = try await subscription(stack)
            #expect(try expired.bool("later"), "an expired subscription that renews is looked at again later")

            // Nothing is due: the pass claims nothing and asks Apple nothing.
            #expect(try await RenewalRefresher.refreshDue(service: service) == false)
            #expect(apple.calls.count == 1)

            // Due now, and Apple reports the renewal.
            try await makeDue(stack)
            var renewed = FakeReceipt(bundleID: ServiceHarness.bundleID)
            renewed.addSubscription("com.example.premium.monthly", originalTransactionID: "refresh-1",
                                    start: now.addingTimeInterval(-61 * 86_400), period: month, periods: 3)
            apple.enqueue(try renewed.verified())
            #expect(try await RenewalRefresher.refreshDue(service: service) == false)

            #expect(apple.calls.count == 2)
            #expect(apple.calls.last?.receiptData == receipt.receiptData, "the stored latest receipt is re-verified")
            #expect(apple.calls.last?.environment == .production)
            let refreshed = try await subscription(stack)
            #expect(try refreshed.date("latest_expires_date") > expired.date("latest_expires_date"))
            #expect(try refreshed.date("latest_expires_date") > now)
            #expect(try refreshed.bool("later"))
            #expect(try refreshed.int("refresh_attempts") == 0)
            let transactions = try await stack.sql("SELECT transaction_id FROM app_store_transactions ORDER BY purchase_date")
            #expect(transactions.count == 3)
            let owners = try await stack.sql("SELECT DISTINCT user_id FROM purchase_owners")
            #expect(try owners.map { try $0.string("user_id") } == ["refresh-user"])
            let document = try await EntitlementReader(snapshots: UserSnapshotLoader(pool: stack.pool), catalog: stack.catalog).document(userID: "refresh-user", at: now)
            #expect(document.entitlements["premium"]?.active == true)
        }
    }

    @Test func aRejectionStopsRefreshingAndAnOutageDefers() async throws {
        try await PurchaseStack.run { stack in
            let apple = ScriptedVerifier()
            let (_, service) = try await subscribed(stack, apple)

            try await makeDue(stack)
            apple.enqueue(.retryLater(appleStatus: nil, reason: "HTTP 503"))
            #expect(try await RenewalRefresher.refreshDue(service: service) == false)
            let deferred = try await subscription(stack)
            #expect(try deferred.bool("later"))
            #expect(try deferred.int("refresh_attempts") == 1)
            #expect(try await RenewalRefresher.refreshDue(service: service) == false)
            #expect(apple.calls.count == 2, "a deferred subscription is not due at once")

            try await makeDue(stack)
            apple.enqueue(.rejected(appleStatus: 21010, detail: "receipt gone"))
            #expect(try await RenewalRefresher.refreshDue(service: service) == false)
            #expect(try await subscription(stack).optionalDate("next_refresh_at") == nil)
            #expect(try await subscription(stack).int("refresh_attempts") == 2)
            #expect(apple.calls.count == 3)
        }
    }
}
