import EntitlementModel
import Foundation
import Testing
import X509
@testable import FakeAppStore
@testable import ServiceRuntime

/// The fake App Store's StoreKit 2 control API over HTTP: signed purchases, their lifecycle, and the V2
/// notifications it sends (to a scripted receiver).
@Suite(.timeLimit(.minutes(1))) struct FakeStoreKitServerTests {
    static let token = "7e3fb20b-4cdb-47cc-936d-99d65f608138"

    /// Buys `productID` and checks the fake took it; returns the answer.
    @Loop static func buy(_ fake: FakeAppStoreHarness, _ type: String, _ productID: String = "com.example.p", extra: [String: JSONValue] = [:]) async throws -> JSONValue {
        let body = JSONValue.object(["product_id": .string(productID), "type": .string(type)].merging(extra) { $1 })
        let (status, answer, text) = try await fake.call("POST", "/control/storekit/purchases", body)
        guard status == 201, let answer else { throw FakeAppStoreHarness.HarnessFailure(message: "purchase refused with \(status): \(text)") }
        return answer
    }

    /// The `signedPayload` of each notification `server` received, in arrival order.
    static func signedPayloads(_ server: ScriptedHTTPServer) throws -> [String] {
        try server.requests.map { request in
            let body = try JSONDecoder().decode(JSONValue.self, from: Data(request.body))
            return try #require(body[member: "signedPayload"]?.text)
        }
    }

    @Test @Loop func rootCertificateIsServedAsDERAndPEM() async throws {
        try await FakeAppStoreHarness.run(FakeAppStoreConfiguration(bundleID: "com.example.other", appAppleID: 42)) { fake in
            let chain = fake.fake.signingChain
            let der = try await fake.exchange("GET", "/control/signing/root.der")
            #expect(der.status == 200 && der.body == chain.rootDER && der.headers["Content-Type"] == "application/pkix-cert")
            let pem = try await fake.exchange("GET", "/control/signing/root.pem")
            #expect(try Certificate(pemEncoded: pem.text) == chain.root)
            let signing = try #require(try await fake.call("GET", "/control/signing").body)
            #expect(signing[member: "root"]?.text == Data(chain.rootDER).base64EncodedString())
            #expect(signing[member: "intermediate"]?.text == Data(chain.intermediateDER).base64EncodedString())
            #expect(signing[member: "bundle_id"] == "com.example.other" && signing[member: "app_apple_id"] == 42)
        }
    }

    @Test(arguments: ["consumable", "non_consumable", "auto_renewable", "non_renewing"])
    @Loop func purchaseIsSignedByTheChain(type: String) async throws {
        try await FakeAppStoreHarness.run(FakeAppStoreConfiguration(bundleID: "com.example.other")) { fake in
            let root = fake.fake.signingChain.root
            let answer = try await Self.buy(fake, type, extra: ["app_account_token": .string(Self.token.uppercased()), "quantity": 3])
            let payload = try #require(answer[member: "payload"])
            #expect(try await SignedJWSCheck.verify(#require(answer[member: "signed_transaction"]?.text), root: root) == payload)
            #expect(payload[member: "bundleId"] == "com.example.other" && payload[member: "quantity"] == 3)
            #expect(payload[member: "appAccountToken"]?.text == Self.token)
            #expect(answer[member: "transaction_id"] == payload[member: "transactionId"] && answer[member: "type"]?.text == type)
            let expected = ["consumable": "Consumable", "non_consumable": "Non-Consumable",
                            "auto_renewable": "Auto-Renewable Subscription", "non_renewing": "Non-Renewing Subscription"][type]
            #expect(payload[member: "type"]?.text == expected)
            if type == "auto_renewable" {
                let renewal = try #require(answer[member: "renewal_info"])
                #expect(try await SignedJWSCheck.verify(#require(answer[member: "signed_renewal_info"]?.text), root: root) == renewal)
                #expect(answer[member: "status"] == 1 && answer[member: "notification_type"] == "SUBSCRIBED")
            } else {
                #expect(answer[member: "signed_renewal_info"] == nil && answer[member: "status"] == nil)
                #expect(answer[member: "notification_type"] == "ONE_TIME_CHARGE")
            }
        }
    }

    /// Copies carry the very same signed payload (one notificationUUID); all verify, with the nested
    /// transaction and renewal info.
    @Test @Loop func copiesShareTheNotificationUUIDAndVerify() async throws {
        try await FakeAppStoreHarness.run { fake in
            let root = fake.fake.signingChain.root
            let purchase = try await Self.buy(fake, "auto_renewable")
            let id = try #require(purchase[member: "transaction_id"]?.text)
            try await ScriptedHTTPServer.run(Array(repeating: .ok(), count: 3)) { server in
                let (status, answer, text) = try await fake.call("POST", "/control/storekit/notifications", [
                    "url": .string(server.baseURL + "/apple"), "notification_type": "DID_RENEW", "transaction_id": .string(id),
                    "copies": 3, "parallel": true,
                ])
                #expect(status == 200, "\(text)")
                #expect(answer?[member: "deliveries"] == [["status": 200], ["status": 200], ["status": 200]])
                let uuid = try #require(answer?[member: "notification_uuid"]?.text)
                let bodies = Set(server.requests.map(\.body))
                #expect(server.requests.count == 3 && bodies.count == 1)
                #expect(server.requests.allSatisfy { $0.target == "/apple" && $0.header("Content-Type") == "application/json" })
                let payload = try await SignedJWSCheck.verify(try #require(Self.signedPayloads(server).first), root: root)
                #expect(payload == answer?[member: "payload"])
                #expect(payload[member: "notificationUUID"]?.text == uuid && payload[member: "notificationType"] == "DID_RENEW")
                let data = try #require(payload[member: "data"])
                #expect(data[member: "status"] == 1 && data[member: "appAppleId"] == 1_234_567_890 && data[member: "environment"] == "Sandbox")
                let transaction = try await SignedJWSCheck.verify(try #require(data[member: "signedTransactionInfo"]?.text), root: root)
                #expect(transaction[member: "transactionId"]?.text == id)
                _ = try await SignedJWSCheck.verify(try #require(data[member: "signedRenewalInfo"]?.text), root: root)
            }
        }
    }

    /// A tampered payload reads as genuine but its signature no longer verifies; an older notification
    /// (sent after a newer one) carries its past signed date and still verifies at it.
    @Test @Loop func tamperBreaksTheSignatureAndOlderNotificationsVerifyAtTheirDate() async throws {
        try await FakeAppStoreHarness.run { fake in
            let root = fake.fake.signingChain.root
            let id = try #require(try await Self.buy(fake, "consumable")[member: "transaction_id"])
            let lastMonth = Int(Date().timeIntervalSince1970 * 1_000) - 30 * 86_400_000
            try await ScriptedHTTPServer.run([.ok(), .ok(), .ok()]) { server in
                let url = JSONValue.string(server.baseURL)
                let newer = try #require(try await fake.call("POST", "/control/storekit/notifications", ["url": url, "notification_type": "REFUND", "transaction_id": id]).body)
                let older = try #require(try await fake.call("POST", "/control/storekit/notifications", [
                    "url": url, "notification_type": "ONE_TIME_CHARGE", "transaction_id": id, "signed_date": .int(lastMonth),
                ]).body)
                let tampered = try #require(try await fake.call("POST", "/control/storekit/notifications", [
                    "url": url, "notification_type": "REFUND", "transaction_id": id, "tamper": true,
                ]).body)
                let sent = try Self.signedPayloads(server)
                #expect(sent.count == 3)
                #expect(try await SignedJWSCheck.verify(sent[0], root: root)[member: "notificationUUID"] == newer[member: "notification_uuid"])
                let old = try await SignedJWSCheck.verify(sent[1], root: root)
                #expect(old[member: "signedDate"] == .int(lastMonth) && old[member: "notificationUUID"] == older[member: "notification_uuid"])
                let nested = try #require(old[member: "data"]?[member: "signedTransactionInfo"]?.text)
                #expect(try await SignedJWSCheck.verify(nested, root: root)[member: "signedDate"] == .int(lastMonth))

                #expect(tampered[member: "tampered"] == true && sent[2] == tampered[member: "signed_payload"]?.text)
                await #expect(throws: SignedJWSCheck.Failure.self) { try await SignedJWSCheck.verify(sent[2], root: root) }
                let altered = try SignedJWSCheck.payload(sent[2])
                #expect(altered[member: "notificationType"] == "REFUND" && altered == tampered[member: "payload"])
            }
        }
    }

    /// 100 notifications twice each, shuffled with a seed: 200 deliveries in the order the answer reports,
    /// each notificationUUID exactly twice.
    @Test @Loop func batchSendsEveryCopyInAShuffledOrder() async throws {
        try await FakeAppStoreHarness.run { fake in
            var ids: [JSONValue] = []
            for index in 0..<10 {
                ids.append(try #require(try await Self.buy(fake, index % 2 == 0 ? "auto_renewable" : "consumable")[member: "transaction_id"]))
            }
            let types: [JSONValue] = ["DID_RENEW", "REFUND", "DID_CHANGE_RENEWAL_STATUS", "ONE_TIME_CHARGE"]
            let notifications: [JSONValue] = (0..<100).map { index in
                ["notification_type": types[index % types.count], "transaction_id": ids[index % ids.count], "copies": 2]
            }
            try await ScriptedHTTPServer.run(Array(repeating: .ok(), count: 200)) { server in
                let (status, body, text) = try await fake.call("POST", "/control/storekit/notifications/batch", [
                    "url": .string(server.baseURL), "notifications": .array(notifications), "seed": 7, "concurrency": 1,
                ])
                #expect(status == 200, "\(text)")
                let answer = try #require(body)
                #expect(answer[member: "sent"] == 200 && answer[member: "delivered"] == 200)
                guard case .array(let reported)? = answer[member: "notifications"], case .array(let orderValues)? = answer[member: "order"] else {
                    Issue.record("no notifications or order in \(text)")
                    return
                }
                let uuids = reported.map { $0[member: "notification_uuid"]?.text ?? "" }
                #expect(reported.allSatisfy { $0[member: "statuses"] == [200, 200] })
                let order = orderValues.compactMap { if case .int(let index) = $0 { index } else { nil } }
                #expect(order.count == 200 && order != order.sorted())
                let received = try Self.signedPayloads(server).map { try SignedJWSCheck.payload($0)[member: "notificationUUID"]?.text ?? "" }
                #expect(received == order.map { uuids[$0] })
                #expect(Dictionary(grouping: received, by: { $0 }).values.allSatisfy { $0.count == 2 } && Set(received).count == 100)
            }
        }
    }

    @Test @Loop func lifecycleChangesAnswerTheirStatusAndSendTheirNotification() async throws {
        try await FakeAppStoreHarness.run { fake in
            let root = fake.fake.signingChain.root
            let original = try #require(try await Self.buy(fake, "auto_renewable")[member: "original_transaction_id"]?.text)
            let steps: [(String, JSONValue, String, JSONValue, Int)] = [
                ("grace_period", [:], "DID_FAIL_TO_RENEW", "GRACE_PERIOD", 4),
                ("billing_retry", [:], "DID_FAIL_TO_RENEW", nil, 3),
                ("renew", [:], "DID_RENEW", "BILLING_RECOVERY", 1),
                ("auto_renew_off", [:], "DID_CHANGE_RENEWAL_STATUS", "AUTO_RENEW_DISABLED", 1),
                ("upgrade", ["product_id": "com.example.yearly"], "DID_CHANGE_RENEWAL_PREF", "UPGRADE", 1),
                ("refund", ["revocation_reason": 1], "REFUND", nil, 5),
                ("expire", ["expiration_intent": 2], "EXPIRED", "BILLING_RETRY", 5),
            ]
            try await ScriptedHTTPServer.run(Array(repeating: .ok(), count: steps.count)) { server in
                for (index, (action, body, type, subtype, status)) in steps.enumerated() {
                    guard case .object(var members) = body else { continue }
                    members["notify"] = ["url": .string(server.baseURL)]
                    let (code, answer, text) = try await fake.call("POST", "/control/storekit/purchases/\(original)/\(action)", .object(members))
                    #expect(code == 200, "\(action): \(text)")
                    #expect(answer?[member: "notification_type"]?.text == type && answer?[member: "subtype"] == subtype, "\(action)")
                    #expect(answer?[member: "status"] == .int(status), "\(action): \(text)")
                    #expect(answer?[member: "notification"]?[member: "deliveries"] == [["status": 200]], "\(action)")
                    let sent = try await SignedJWSCheck.verify(try Self.signedPayloads(server)[index], root: root)
                    #expect(sent[member: "notificationType"]?.text == type && sent[member: "subtype"] == (subtype == .null ? JSONValue?.none : subtype))
                    #expect(sent[member: "data"]?[member: "status"] == .int(status), "\(action)")
                }
            }
            let state = try #require(try await fake.call("GET", "/control/storekit/purchases/\(original)").body)
            guard case .array(let transactions)? = state[member: "transactions"] else {
                Issue.record("no transactions")
                return
            }
            #expect(transactions.count == 3)
            #expect(transactions.map { $0[member: "payload"]?[member: "productId"]?.text } == ["com.example.p", "com.example.p", "com.example.yearly"])
            #expect(transactions[1][member: "payload"]?[member: "isUpgraded"] == true)
            #expect(state[member: "renewal_info"]?[member: "expirationIntent"] == 2 && state[member: "status"] == 5)
        }
    }

    /// A receiver that drops the connection is reported, not failed; the same purchases verify through
    /// verifyReceipt.
    @Test @Loop func failedDeliveryIsReportedAndPurchasesShowInTheReceipt() async throws {
        try await FakeAppStoreHarness.run { fake in
            let id = try #require(try await Self.buy(fake, "non_consumable", extra: ["app_account_token": .string(Self.token)])[member: "transaction_id"]?.text)
            try await ScriptedHTTPServer.run([.drop]) { server in
                let (status, answer, _) = try await fake.call("POST", "/control/storekit/notifications", [
                    "url": .string(server.baseURL), "notification_type": "TEST",
                ])
                #expect(status == 200)
                guard case .array(let deliveries)? = answer?[member: "deliveries"] else { return }
                #expect(deliveries.count == 1 && deliveries[0][member: "status"] == .null && deliveries[0][member: "error"]?.text != nil)
            }
            let receiptData = try #require(try await fake.call("GET", "/control/storekit/receipt?environment=Sandbox&app_account_token=\(Self.token)").body?[member: "receipt_data"])
            let verified = try #require(try await fake.call("POST", "/sandbox/verifyReceipt", ["receipt-data": receiptData]).body)
            #expect(verified[member: "status"] == 0)
            guard case .array(let inApp)? = verified[member: "receipt"]?[member: "in_app"] else {
                Issue.record("no in_app")
                return
            }
            #expect(inApp.map { $0[member: "transaction_id"]?.text } == [id])
        }
    }

    @Test @Loop func controlAPIRefusesBadStoreKitRequestsByField() async throws {
        try await FakeAppStoreHarness.run { fake in
            let consumable = try #require(try await Self.buy(fake, "consumable")[member: "transaction_id"]?.text)
            let subscription = try #require(try await Self.buy(fake, "auto_renewable")[member: "transaction_id"]?.text)
            let cases: [(String, String, JSONValue, Int, String?)] = [
                ("POST", "/control/storekit/purchases", ["type": "consumable"], 400, "product_id"),
                ("POST", "/control/storekit/purchases", ["product_id": "p", "type": "subscription"], 400, "type"),
                ("POST", "/control/storekit/purchases", ["product_id": "p", "type": "consumable", "app_account_token": "nope"], 400, "app_account_token"),
                ("POST", "/control/storekit/purchases", ["product_id": "p", "type": "consumable", "environment": "Xcode"], 400, "environment"),
                ("POST", "/control/storekit/purchases", ["product_id": "p", "type": "consumable", "quantity": 0], 400, "quantity"),
                ("POST", "/control/storekit/purchases", ["product_id": "p", "type": "consumable", "currency": "usd"], 400, "currency"),
                ("POST", "/control/storekit/purchases", ["product_id": "p", "type": "auto_renewable", "period": "1M"], 400, "period"),
                ("POST", "/control/storekit/purchases", ["product_id": "p", "type": "consumable", "purchase_date": "yesterday"], 400, "purchase_date"),
                ("POST", "/control/storekit/purchases", ["product_id": "p", "type": "consumable", "transaction_id": .string(consumable)], 409, "transaction_id"),
                ("POST", "/control/storekit/purchases", ["product_id": "p", "type": "consumable", "notify": ["url": "ftp://x"]], 400, "notify.url"),
                ("POST", "/control/storekit/purchases", ["product_id": "p", "type": "consumable", "notify": ["url": "http://x", "copies": 0]], 400, "notify.copies"),
                ("POST", "/control/storekit/purchases/\(consumable)/renew", [:], 409, nil),
                ("POST", "/control/storekit/purchases/\(subscription)/rewind", [:], 404, nil),
                ("POST", "/control/storekit/purchases/999/refund", [:], 404, nil),
                ("POST", "/control/storekit/purchases/\(subscription)/upgrade", [:], 400, "product_id"),
                ("POST", "/control/storekit/purchases/\(subscription)/expire", ["expiration_intent": 9], 400, "expiration_intent"),
                ("POST", "/control/storekit/purchases/\(subscription)/refund", ["reason": 1], 400, "reason"),
                ("POST", "/control/storekit/notifications", ["notification_type": "TEST"], 400, "url"),
                ("POST", "/control/storekit/notifications", ["url": "http://x"], 400, "notification_type"),
                ("POST", "/control/storekit/notifications", ["url": "http://x", "notification_type": "REFUND", "transaction_id": "999"], 404, "transaction_id"),
                ("POST", "/control/storekit/notifications/batch", ["url": "http://x", "notifications": []], 400, "notifications"),
                ("POST", "/control/storekit/notifications/batch", ["url": "http://x", "notifications": [["copies": 2]]], 400, "notifications[0].notification_type"),
                ("GET", "/control/storekit/purchases/999", nil, 404, nil),
                ("GET", "/control/storekit/receipt?environment=Xcode", nil, 400, "environment"),
            ]
            for (method, path, body, expectedStatus, field) in cases {
                let (status, problem, text) = try await fake.call(method, path, body == .null ? nil : body)
                #expect(status == expectedStatus, "\(method) \(path) \(body.jsonText): \(text)")
                #expect(problem?[member: "field"]?.text == field, "\(method) \(path) \(body.jsonText): \(text)")
            }
            // A bad `notify` refuses the change before it is made.
            let refund = try await fake.call("POST", "/control/storekit/purchases/\(consumable)/refund", ["notify": ["url": "http://x", "tamper": "yes"]])
            #expect(refund.status == 400)
            #expect(try await fake.call("GET", "/control/storekit/purchases/\(consumable)").body?[member: "transactions"]
                    .map { if case .array(let list) = $0 { list[0][member: "payload"]?[member: "revocationDate"] == nil } else { false } } == true)

            #expect(try await fake.call("POST", "/control/reset").status == 200)
            #expect(try await fake.call("GET", "/control/storekit/purchases/\(consumable)").status == 404)
            let root = try await fake.exchange("GET", "/control/signing/root.der")
            #expect(root.body == fake.fake.signingChain.rootDER)
        }
    }
}
