import EntitlementModel
import Foundation
import Testing
@testable import AppStore
@testable import EntitlementService
@testable import FakeAppStore
@testable import ServiceRuntime

/// App Store Server Notifications (version 1 and signed version 2) through the real service.
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

    /// A V2 notification of `type` for `transaction`, signed (with its transaction info) by `chain`.
    private func signedNotification(_ type: String, _ transaction: StoreTransaction, chain: TestSigningChain) throws -> String {
        let ms = { (date: Date) in (date.timeIntervalSince1970 * 1000).rounded() }
        var info: [String: Any] = [
            "transactionId": transaction.transactionID, "originalTransactionId": transaction.originalTransactionID,
            "productId": transaction.productID, "purchaseDate": ms(transaction.purchaseDate), "bundleId": ServiceHarness.bundleID,
            "environment": "Production", "type": "Auto-Renewable Subscription", "inAppOwnershipType": "PURCHASED", "quantity": 1,
            "signedDate": ms(now),
        ]
        info["expiresDate"] = transaction.expiresDate.map(ms)
        info["revocationDate"] = transaction.cancellationDate.map(ms)
        info["revocationReason"] = transaction.cancellationReason.flatMap { Int($0) }
        let payload: [String: Any] = [
            "notificationType": type, "notificationUUID": UUID().uuidString, "version": "2.0", "signedDate": ms(now),
            "data": ["bundleId": ServiceHarness.bundleID, "environment": "Production", "appAppleId": SignedPayloads.appAppleID,
                     "signedTransactionInfo": try chain.sign(info)],
        ]
        return String(decoding: try JSONSerialization.data(withJSONObject: ["signedPayload": try chain.sign(payload)]), as: UTF8.self)
    }

    @Test func aSignedRefundEndsAccessAndOneFromAnUntrustedChainChangesNothing() async throws {
        let chain = try TestSigningChain()
        let rootFile = try chain.writeRoot()
        defer { try? FileManager.default.removeItem(atPath: rootFile) }
        try await ServiceHarness.run(["APPLE_ROOT_CERTIFICATES": rootFile, "APPLE_APP_APPLE_ID": "\(SignedPayloads.appAppleID)"]) { service in
            var receipt = FakeReceipt(bundleID: ServiceHarness.bundleID)
            let bought = receipt.addSubscription("com.example.premium.monthly", originalTransactionID: "v2-1", start: now.addingTimeInterval(-86_400),
                                                 period: try ISODuration(parsing: "P1M"))
            #expect(try await service.post(receipt, for: "signed-user").status == 200)
            var refunded = try #require(bought.first)
            refunded.cancellationDate = now.addingTimeInterval(-5)
            refunded.cancellationReason = "0"

            let forged = try await service.request("POST", "/v1/notifications/app-store",
                                                   json: signedNotification("REFUND", refunded, chain: TestSigningChain(name: "Untrusted")), key: nil)
            #expect(forged.status == 401, "\(forged.text)")
            #expect(try forged.json()["field"] as? String == "signedPayload")
            #expect(try await service.entitlements("signed-user").entitlement("premium")?["active"] as? Bool == true)

            let refund = try await service.request("POST", "/v1/notifications/app-store", json: signedNotification("REFUND", refunded, chain: chain), key: nil)
            #expect(refund.status == 200, "\(refund.text)")
            #expect(try refund.json()["status"] as? String == "received")
            let premium = try #require(try await service.entitlements("signed-user").entitlement("premium"))
            #expect(premium["active"] as? Bool == false)
            #expect(premium["inactive_reason"] as? String == "refunded")
        }
    }

    @Test func signedNotificationsOfAnotherAppOrWithoutAChainAreRefused() async throws {
        let chain = try TestSigningChain()
        let rootFile = try chain.writeRoot()
        defer { try? FileManager.default.removeItem(atPath: rootFile) }
        try await ServiceHarness.run(["APPLE_ROOT_CERTIFICATES": rootFile, "APPLE_APP_APPLE_ID": "\(SignedPayloads.appAppleID)"]) { service in
            let test = { (data: [String: Any]) in
                ["notificationType": "TEST", "notificationUUID": UUID().uuidString, "signedDate": SignedPayloads.ms(now),
                 "data": ["bundleId": ServiceHarness.bundleID, "environment": "Sandbox", "appAppleId": SignedPayloads.appAppleID].merging(data) { $1 }]
            }
            let unsignedTransaction = try TestSigningChain.unsigned(SignedPayloads.transaction(["bundleId": ServiceHarness.bundleID]))
            for (jws, status) in [
                (try chain.sign(test([:])), 200), (try chain.sign(test(["bundleId": "com.example.other"])), 422),
                (try chain.sign(test(["appAppleId": 1])), 422), (try chain.sign(test(["environment": "Xcode"])), 422),
                (try chain.sign(test(["environment": "Production", "appAppleId": NSNull()])), 422),
                (try chain.sign(test(["signedTransactionInfo": unsignedTransaction])), 401),
                (try chain.sign(test([:]), header: ["alg": "ES256"]), 401),
                (try TestSigningChain(name: "Untrusted").sign(test([:])), 401),
                (try chain.sign(test(["signedTransactionInfo": try chain.sign(["transactionId": "1", "bundleId": ServiceHarness.bundleID,
                                                                              "environment": "Sandbox"])])), 422),
            ] {
                let answer = try await service.request("POST", "/v1/notifications/app-store", json: #"{"signedPayload": "\#(jws)"}"#, key: nil)
                #expect(answer.status == status, "\(answer.text)")
                #expect(try answer.json()["field"] as? String == (status == 200 ? nil : "signedPayload"))
            }
            // Apple's own test notification: its test CA lacks authority key identifiers, which Apple's library refuses too.
            let mock = String(decoding: try Fixtures.data("mock_jws_notification_test_applelib.jws"), as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
            #expect(try await service.request("POST", "/v1/notifications/app-store", json: #"{"signedPayload": "\#(mock)"}"#, key: nil).status == 401)
        }
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
            let unsigned = try await service.request("POST", "/v1/notifications/app-store", json: #"{"signedPayload": "eyJ..."}"#, key: nil)
            #expect(unsigned.status == 401)
            #expect(try unsigned.json()["field"] as? String == "signedPayload")
            let notText = try await service.request("POST", "/v1/notifications/app-store", json: #"{"signedPayload": 5}"#, key: nil)
            #expect(notText.status == 400)
            let junk = try await service.request("POST", "/v1/notifications/app-store", json: "not json", key: nil)
            #expect(junk.status == 400)
        }
    }

    /// A signed part holding an escaped NUL (which `jsonb` refuses) is stored with U+FFFD in its place, not lost to
    /// a failed insert; a backslash escaped itself before `u0000` is text, left as it is.
    @Test func aNULInASignedPartIsStoredAsAReplacementCharacter() {
        let stored = { (json: String) in String(decoding: NotificationIntake.storable(Data(json.utf8)), as: UTF8.self) }
        #expect(stored(#"{"a":"x\u0000y","b":"\\u0000"}"#) == #"{"a":"x\ufffdy","b":"\\u0000"}"#)
        #expect(stored(#"{"a":"\\\u0000"}"#) == #"{"a":"\\\ufffd"}"#)
        #expect(stored(#"{"a":1}"#) == #"{"a":1}"#)
    }


    /// The notification route reads its body itself: a trailing comma or a name given twice is a 400 there too.
    @Test func aLenientBodyIsRefused() async throws {
        try await ServiceHarness.run { service in
            for body in [#"{"signedPayload": "x",}"#, #"{"signedPayload": "x", "signedPayload": "y"}"#] {
                let answer = try await service.request("POST", "/v1/notifications/app-store", json: body, key: nil)
                #expect(answer.status == 400, "\(body): \(answer.text)")
            }
        }
    }

}
