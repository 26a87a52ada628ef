import EntitlementModel
import Foundation
import Testing
@testable import EntitlementService

/// App Store Server Notifications (version 1) through the real service.
@Suite(.serialized, .timeLimit(.minutes(2)))
@Loop
struct NotificationTests {
    let now = Date()

    private func notification(_ type: String, _ receipt: FakeReceipt, password: String) -> String {
        guard case .object(var unified) = receipt.verifyReceiptBody(receiptData: receipt.receiptData, requestDate: now, excludeOldTransactions: false) else {
            return "{}"
        }
        unified.removeValue(forKey: "receipt")
        let body: JSONValue = [
            "notification_type": .string(type), "password": .string(password), "environment": "PROD",
            "unified_receipt": .object(unified),
        ]
        return body.jsonText
    }

    @Test func aRefundNotificationEndsAccessAtOnce() async throws {
        try await ServiceHarness.run { service in
            var receipt = FakeReceipt(bundleID: ServiceHarness.bundleID)
            receipt.addSubscription("com.example.premium.monthly", originalTransactionID: "n-1", start: now.addingTimeInterval(-86_400),
                                    period: try ISODuration(parsing: "P1M"))
            #expect(try await service.post(receipt, for: "notified-user").status == 200)
            #expect(try await service.entitlements("notified-user").entitlement("premium")?["active"] as? Bool == true)

            receipt.cancel(transactionID: "n-1", at: now.addingTimeInterval(-5))
            let refund = notification("REFUND", receipt, password: ServiceHarness.sharedSecret)
            let answer = try await service.request("POST", "/v1/notifications/app-store", json: refund, key: nil)
            #expect(answer.status == 200, "\(answer.text)")
            let premium = try #require(try await service.entitlements("notified-user").entitlement("premium"))
            #expect(premium["active"] as? Bool == false)
            #expect(premium["inactive_reason"] as? String == "refunded")
        }
    }

    @Test func aWrongPasswordOrASignedPayloadIsRefused() async throws {
        try await ServiceHarness.run { service in
            var receipt = FakeReceipt(bundleID: ServiceHarness.bundleID)
            receipt.addPurchase("com.example.lifetime", transactionID: "n-2", purchased: now)
            let forged = try await service.request("POST", "/v1/notifications/app-store", json: notification("REFUND", receipt, password: "guess"), key: nil)
            #expect(forged.status == 401)
            #expect(!forged.text.contains(ServiceHarness.sharedSecret))
            let signed = try await service.request("POST", "/v1/notifications/app-store", json: #"{"signedPayload": "eyJ..."}"#, key: nil)
            #expect(signed.status == 422)
            let junk = try await service.request("POST", "/v1/notifications/app-store", json: "not json", key: nil)
            #expect(junk.status == 400)
        }
    }
}
