import EntitlementModel
import Foundation
import Testing
@testable import AppStore
@testable import EntitlementService
@testable import FakeAppStore
@testable import ServiceRuntime

/// `POST /v1/transactions`, app account tokens and `GET /v1/products` through the real service and PostgreSQL.
@Suite(.serialized, .timeLimit(.minutes(3)))
@Loop
struct StoreKitTransactionTests {
    let now = Date()

    private func run(_ environment: [String: String] = [:], _ body: (ServiceHarness, SignedStoreKit) async throws -> Void) async throws {
        let storeKit = try SignedStoreKit()
        defer { storeKit.removeRoot() }
        try await ServiceHarness.run(storeKit.environment.merging(environment) { $1 }) { try await body($0, storeKit) }
    }

    @Test func everyProductTypeBoughtWithASignedTransaction() async throws {
        try await run { service, storeKit in
            let bought: [SignedStoreKit.Transaction] = [
                .init(id: "sk-sub", productID: "com.example.premium.monthly", kind: .autoRenewable, purchased: now.addingTimeInterval(-3_600),
                      expires: now.addingTimeInterval(30 * 86_400), signed: now),
                .init(id: "sk-life", productID: "com.example.lifetime", kind: .nonConsumable, purchased: now.addingTimeInterval(-60), signed: now),
                .init(id: "sk-pass", productID: "com.example.pass.month", kind: .nonRenewing, purchased: now.addingTimeInterval(-60), signed: now),
                .init(id: "sk-coins", productID: "com.example.coins.100", kind: .consumable, purchased: now.addingTimeInterval(-60), quantity: 2,
                      signed: now),
            ]
            for transaction in bought {
                let answer = try await service.postSigned([try storeKit.sign(transaction)], for: "sk-buyer")
                #expect(answer.status == 200, "\(transaction.id): \(answer.text)")
                let body = try answer.json()
                #expect(body["transaction_id"] as? String == transaction.id)
                #expect(body["transaction_ids"] == nil)
                #expect(body["environment"] as? String == "Production")
                #expect(body["user_id"] as? String == "sk-buyer")
            }
            let document = try await service.entitlements("sk-buyer")
            let premium = try #require(document.entitlement("premium"))
            #expect(premium["active"] as? Bool == true)
            #expect(premium["product_type"] as? String == "auto_renewable")
            #expect(premium["original_transaction_id"] as? String == "sk-sub")
            #expect(document.entitlement("pro")?["active"] as? Bool == true)
            #expect(document.entitlement("pro")?["expires_at"] is NSNull)
            #expect(document.entitlement("pass")?["active"] as? Bool == true)
            #expect((document["consumables"] as? [String: Any])?["coins"] as? Int == 200)
            let stored = try await service.sql("SELECT count(*)::int AS n FROM app_store_transactions WHERE signed_date IS NOT NULL")
            #expect(try stored[0].int("n") == 4)
        }
    }

    @Test func aConsumablePostedFiftyTimesAtOnceCreditsOnce() async throws {
        try await run { service, storeKit in
            let jws = try storeKit.sign(.init(id: "sk-fifty", productID: "com.example.coins.100", kind: .consumable, purchased: now, signed: now))
            let answers = try await withThrowingTaskGroup(of: Int.self) { group in
                for _ in 0..<50 { group.addTask { try await service.postSigned([jws], for: "fifty-user").status } }
                var all: [Int] = []
                for try await status in group { all.append(status) }
                return all
            }
            #expect(answers.allSatisfy { $0 == 200 }, "\(answers)")
            let document = try await service.entitlements("fifty-user")
            #expect((document["consumables"] as? [String: Any])?["coins"] as? Int == 100)
            let credits = try await service.sql("SELECT count(*)::int AS n FROM consumable_ledger WHERE transaction_id = 'sk-fifty'")
            #expect(try credits[0].int("n") == 1)
        }
    }

    @Test func aRestorePostsAListVerifiedWholeBeforeAnythingIsRecorded() async throws {
        try await run { service, storeKit in
            let subscription = try storeKit.sign(.init(id: "r-sub", productID: "com.example.premium.yearly", kind: .autoRenewable,
                                                       purchased: now.addingTimeInterval(-86_400), expires: now.addingTimeInterval(300 * 86_400), signed: now))
            let lifetime = try storeKit.sign(.init(id: "r-life", productID: "com.example.lifetime", kind: .nonConsumable, purchased: now, signed: now))
            let untrusted = try TestSigningChain(name: "Untrusted").sign(
                SignedStoreKit.Transaction(id: "r-bad", productID: "com.example.lifetime", kind: .nonConsumable, purchased: now, signed: now).payload)

            let refused = try await service.postSigned([subscription, lifetime, untrusted], for: "restorer")
            #expect(refused.status == 422, "\(refused.text)")
            // The field API.md promises for either form, and the element's position.
            #expect(try refused.json()["field"] as? String == "signed_transaction")
            #expect(try refused.json()["index"] as? Int == 2)
            #expect((try refused.json()["detail"] as? String)?.hasPrefix("'signed_transactions[2]'") == true)
            let nothing = try await service.sql("SELECT count(*)::int AS n FROM app_store_transactions")
            #expect(try nothing[0].int("n") == 0)

            let restored = try await service.postSigned([subscription, lifetime, lifetime], for: "restorer")
            #expect(restored.status == 200, "\(restored.text)")
            let body = try restored.json()
            #expect(body["transaction_ids"] as? [String] == ["r-sub", "r-life", "r-life"])
            #expect(body["transaction_id"] == nil)
            #expect(body.entitlement("premium")?["active"] as? Bool == true)
            #expect(body.entitlement("pro")?["active"] as? Bool == true)

            let one = try await service.postSigned([lifetime], for: "restorer", asList: true)
            #expect(try one.json()["transaction_ids"] as? [String] == ["r-life"])
        }
    }

    @Test func badInputIsRefusedAndNothingRecorded() async throws {
        try await run { service, storeKit in
            let valid = SignedStoreKit.Transaction(id: "bad-1", productID: "com.example.lifetime", kind: .nonConsumable, purchased: now, signed: now)
            var otherApp = valid
            otherApp.bundleID = "com.example.other"
            var xcode = valid
            xcode.environment = "Xcode"
            let cases: [(String, String)] = [
                ("not a jws", "garbage"),
                ("untrusted chain", try TestSigningChain(name: "Untrusted").sign(valid.payload)),
                ("another app", try storeKit.sign(otherApp)),
                ("Xcode, not accepted", try storeKit.sign(xcode)),
                ("tampered", String(try storeKit.sign(valid).dropLast(4)) + "AAAA"),
            ]
            for (name, jws) in cases {
                let answer = try await service.postSigned([jws], for: "bad-user")
                #expect(answer.status == 422, "\(name): \(answer.text)")
                #expect(try answer.json()["field"] as? String == "signed_transaction", "\(name)")
            }
            let jws = try storeKit.sign(valid)
            for (json, field) in [
                (#"{"user_id": "bad-user"}"#, "signed_transaction"),
                (#"{"user_id": "bad-user", "signed_transaction": "\#(jws)", "signed_transactions": ["\#(jws)"]}"#, "signed_transactions"),
                (#"{"user_id": "bad-user", "signed_transactions": []}"#, "signed_transactions"),
                (#"{"user_id": "bad-user", "signed_transactions": [\#(Array(repeating: "\"\(jws)\"", count: 101).joined(separator: ","))]}"#, "signed_transactions"),
                (#"{"user_id": "", "signed_transaction": "\#(jws)"}"#, "user_id"),
                (#"{"user_id": "bad-user", "signed_transaction": "\#(jws)", "order_id": "nope"}"#, "order_id"),
            ] {
                let answer = try await service.request("POST", "/v1/transactions", json: json)
                #expect(answer.status == 400, "\(field): \(answer.text)")
                #expect(try answer.json()["field"] as? String == field)
            }
            #expect(try await service.request("POST", "/v1/transactions", json: #"{"user_id": "u", "signed_transaction": "x"}"#, key: nil).status == 401)
            let nothing = try await service.sql("SELECT count(*)::int AS n FROM app_store_transactions")
            #expect(try nothing[0].int("n") == 0)
        }
    }

    @Test func underKeepAPurchaseOfAnotherUserIsAConflict() async throws {
        try await run(["RESTORE_POLICY": "keep"]) { service, storeKit in
            let jws = try storeKit.sign(.init(id: "keep-1", productID: "com.example.lifetime", kind: .nonConsumable, purchased: now, signed: now))
            #expect(try await service.postSigned([jws], for: "first-owner").status == 200)
            let conflict = try await service.postSigned([jws], for: "second-user")
            #expect(conflict.status == 409, "\(conflict.text)")
            #expect(try conflict.json()["original_transaction_id"] as? String == "keep-1")
            #expect(try await service.entitlements("second-user").entitlement("pro") == nil)
            #expect(try await service.entitlements("first-owner").entitlement("pro")?["active"] as? Bool == true)
        }
    }

    @Test func underTransferTheAnswerNamesThePreviousOwner() async throws {
        try await run { service, storeKit in
            let jws = try storeKit.sign(.init(id: "move-1", productID: "com.example.lifetime", kind: .nonConsumable, purchased: now, signed: now))
            #expect(try await service.postSigned([jws], for: "old-owner").status == 200)
            let moved = try await service.postSigned([jws], for: "new-owner")
            #expect(try moved.json()["transferred_from"] as? String == "old-owner")
            #expect(try await service.entitlements("old-owner").entitlement("pro")?["active"] as? Bool == nil)
        }
    }

    @Test func aUsersTokenIsStableAndBindsItsPurchasesWhoeverPostsThem() async throws {
        try await run(["RESTORE_POLICY": "keep"]) { service, storeKit in
            let first = try await service.request("GET", "/v1/users/token-user/app-account-token")
            #expect(first.status == 200, "\(first.text)")
            let token = try #require(try first.json()["app_account_token"] as? String)
            #expect(token == token.lowercased() && UUID(uuidString: token) != nil)
            #expect(try await service.request("GET", "/v1/users/token-user/app-account-token").json()["app_account_token"] as? String == token)

            // Concurrent first calls for one user agree.
            let tokens = try await withThrowingTaskGroup(of: String.self) { group in
                for _ in 0..<20 {
                    group.addTask { try await service.request("GET", "/v1/users/racer/app-account-token").json()["app_account_token"] as? String ?? "" }
                }
                var all: Set<String> = []
                for try await token in group { all.insert(token) }
                return all
            }
            #expect(tokens.count == 1 && !tokens.contains("") && !tokens.contains(token))

            // Posted by someone else, with the token in upper case: it is token-user's, even under keep.
            let jws = try storeKit.sign(.init(id: "tok-1", productID: "com.example.lifetime", kind: .nonConsumable, purchased: now,
                                              appAccountToken: token.uppercased(), signed: now))
            let answer = try await service.postSigned([jws], for: "someone-else")
            #expect(answer.status == 200, "\(answer.text)")
            #expect(try answer.json().entitlement("pro") == nil)
            #expect(try await service.entitlements("token-user").entitlement("pro")?["active"] as? Bool == true)

            #expect(try await service.request("GET", "/v1/users/%20/app-account-token").status == 400)
            #expect(try await service.request("GET", "/v1/users/token-user/app-account-token", key: nil).status == 401)
        }
    }

    @Test func aReceiptEntryCarryingAUsersTokenIsTheirs() async throws {
        try await run(["RESTORE_POLICY": "keep"]) { service, _ in
            let token = try #require(try await service.request("GET", "/v1/users/receipt-token-user/app-account-token").json()["app_account_token"] as? String)
            var receipt = FakeReceipt(bundleID: ServiceHarness.bundleID)
            receipt.addPurchase("com.example.lifetime", transactionID: "rt-1", purchased: now, appAccountToken: token.uppercased())
            let answer = try await service.post(receipt, for: "another-poster")
            #expect(answer.status == 200, "\(answer.text)")
            #expect(try await service.entitlements("receipt-token-user").entitlement("pro")?["active"] as? Bool == true)
            #expect(try await service.entitlements("another-poster").entitlement("pro") == nil)
        }
    }

    @Test func anOrderIdBindsTheBuyerAndIsFulfilled() async throws {
        try await run { service, storeKit in
            let created = try await service.request("POST", "/v1/orders", json: #"{"user_id": "order-user", "product_id": "com.example.lifetime"}"#)
            let orderID = try #require(try created.json()["order_id"] as? String)
            let jws = try storeKit.sign(.init(id: "ord-1", productID: "com.example.lifetime", kind: .nonConsumable, purchased: now, signed: now))
            #expect(try await service.postSigned([jws], for: "order-user", orderID: orderID).status == 200)
            let order = try await service.request("GET", "/v1/orders/\(orderID)").json()
            #expect(order["status"] as? String == "fulfilled")
            #expect(order["transaction_id"] as? String == "ord-1")

            // An order's token binds like a user's.
            let second = try await service.request("POST", "/v1/orders", json: #"{"user_id": "order-user", "product_id": "com.example.pass.month"}"#).json()
            let token = try #require(second["app_account_token"] as? String)
            let pass = try storeKit.sign(.init(id: "ord-2", productID: "com.example.pass.month", kind: .nonRenewing, purchased: now,
                                               appAccountToken: token, signed: now))
            #expect(try await service.postSigned([pass], for: "a-stranger").status == 200)
            #expect(try await service.entitlements("order-user").entitlement("pass")?["active"] as? Bool == true)
            let fulfilled = try await service.request("GET", "/v1/orders/\(second["order_id"] as? String ?? "")").json()
            #expect(fulfilled["transaction_id"] as? String == "ord-2")

            // A purchase carrying the user's own token (as API.md recommends) still fulfils the order posted with it.
            let own = try #require(try await service.request("GET", "/v1/users/order-user/app-account-token").json()["app_account_token"] as? String)
            let third = try #require(try await service.request("POST", "/v1/orders", json: #"{"user_id": "order-user", "product_id": "com.example.lifetime"}"#)
                .json()["order_id"] as? String)
            let tokened = try storeKit.sign(.init(id: "ord-3", productID: "com.example.lifetime", kind: .nonConsumable, purchased: now,
                                                  appAccountToken: own, signed: now))
            #expect(try await service.postSigned([tokened], for: "order-user", orderID: third).status == 200)
            #expect(try await service.request("GET", "/v1/orders/\(third)").json()["transaction_id"] as? String == "ord-3")

            // An order's token on a purchase of another product does not fulfil it (the cheap product for the dear order).
            let dear = try await service.request("POST", "/v1/orders", json: #"{"user_id": "order-user", "product_id": "com.example.lifetime"}"#).json()
            let coins = try storeKit.sign(.init(id: "ord-4", productID: "com.example.coins.100", kind: .consumable, purchased: now,
                                                appAccountToken: dear["app_account_token"] as? String, signed: now))
            #expect(try await service.postSigned([coins], for: "order-user").status == 200)
            let open = try await service.request("GET", "/v1/orders/\(dear["order_id"] as? String ?? "")").json()
            #expect(open["status"] as? String == "created" && open["transaction_id"] == nil, "\(open)")
        }
    }

    /// Xcode's StoreKit testing payloads, accepted unsigned where listed, are recorded under ids of their own: one
    /// reusing a real purchase's id claims, moves and refunds nothing of it.
    @Test func anUnsignedXcodeTransactionNeverNamesAnAppStorePurchase() async throws {
        try await run(["APPLE_SIGNED_ENVIRONMENTS": "Production,Sandbox,Xcode"]) { service, storeKit in
            let real = SignedStoreKit.Transaction(id: "700", productID: "com.example.lifetime", kind: .nonConsumable,
                                                  purchased: now.addingTimeInterval(-60), signed: now.addingTimeInterval(-60))
            #expect(try await service.postSigned([try storeKit.sign(real)], for: "real-buyer").status == 200)
            var forged = real
            forged.environment = "Xcode"
            forged.revoked = now.addingTimeInterval(-1)
            forged.signed = now
            let unsigned = [#"{"alg":"none"}"#, String(decoding: try JSONSerialization.data(withJSONObject: forged.payload), as: UTF8.self)]
                .map { CompactJWS.base64URL(Data($0.utf8)) }.joined(separator: ".") + "."
            let answer = try await service.postSigned([unsigned], for: "xcode-tester")
            #expect(answer.status == 200, "\(answer.text)")
            #expect(try answer.json()["transaction_id"] as? String == "Xcode:700")
            #expect(try answer.json()["transferred_from"] == nil)
            #expect(try await service.entitlements("real-buyer").entitlement("pro")?["active"] as? Bool == true)
            #expect(try await service.entitlements("real-buyer").entitlement("pro")?["original_transaction_id"] as? String == "700")
            let owners = try await service.sql("SELECT original_transaction_id, user_id FROM purchase_owners ORDER BY 1")
            #expect(try owners.map { [try $0.string("original_transaction_id"), try $0.string("user_id")] }
                    == [["700", "real-buyer"], ["Xcode:700", "xcode-tester"]])
        }
    }

    /// A subscription stated by a signed transaction alone is due for Apple's status at once, unless it is an Xcode
    /// (or LocalTesting) one, which no App Store knows: never due, so no refresh asks about it.
    @Test func anXcodeSubscriptionIsNeverDueForARefresh() {
        let states = PurchaseRecorder.subscriptionStates(["800", "Xcode:800"].map {
            StoreTransaction(transactionID: $0, originalTransactionID: $0, productID: "com.example.premium.monthly",
                             purchaseDate: now.addingTimeInterval(-60), expiresDate: now.addingTimeInterval(86_400))
        }, renewals: [:], fromReceipt: false, now: now)
        let due = Dictionary(uniqueKeysWithValues: states.map { ($0.originalTransactionID, $0.nextRefreshAt) })
        #expect(due["800"] == .some(now) && due["Xcode:800"] == .some(nil), "\(due)")
    }

    @Test func withAServerAPIKeyTheSubscriptionsStatusIsFetchedAtOnce() async throws {
        try await ServiceHarness.run(serverAPI: true) { service in
            let bought = try await service.fakeBuy(["product_id": "com.example.premium.monthly", "type": "auto_renewable", "environment": "Production"])
            let jws = try #require(bought["signed_transaction"] as? String)
            let answer = try await service.postSigned([jws], for: "status-user")
            #expect(answer.status == 200, "\(answer.text)")
            // The signed transaction says nothing of renewal: a new subscription counts as renewing, as Apple starts
            // every one, and Apple's status, fetched in the background, agreeing, changes nothing (no event).
            #expect(try answer.json().entitlement("premium")?["will_renew"] as? Bool == true)
            #expect(try await eventually(timeout: 20, everyMs: 100) {
                try await service.fakeCall("GET", "/control/server-api/requests").text.contains("subscription_statuses")
            })
            #expect(try await eventually(timeout: 20, everyMs: 100) {
                try await service.sql("SELECT 1 FROM subscriptions WHERE renewal_signed_date IS NOT NULL").count == 1
            })
            #expect(try await service.entitlements("status-user").entitlement("premium")?["will_renew"] as? Bool == true)
            #expect(try await WebhookEventTests.events(service, user: "status-user").map(\.type) == ["initial_purchase"])
            // Posted again (an app posting its current entitlements at every launch): Apple's status is known and the
            // period is the same, so the refresher's schedule stands; Apple is not asked again at once.
            let schedule = { @Loop in try await service.sql("SELECT next_refresh_at::text AS at, refresh_attempts FROM subscriptions")
                .map { "\(try $0.optionalString("at") ?? "-") \(try $0.int("refresh_attempts"))" } }
            let scheduled = try await schedule()
            #expect(try await service.postSigned([jws], for: "status-user").status == 200)
            #expect(try await schedule() == scheduled)

            // One whose user already turned renewal off: Apple's status says so, and that is a cancellation.
            let off = try await service.fakeBuy(["product_id": "com.example.premium.monthly", "type": "auto_renewable", "environment": "Production"])
            let original = try #require(off["original_transaction_id"] as? String)
            #expect(try await service.fakeCall("POST", "/control/storekit/purchases/\(original)/auto_renew_off", [:]).status == 200)
            #expect(try await service.postSigned([try #require(off["signed_transaction"] as? String)], for: "off-user").status == 200)
            #expect(try await eventually(timeout: 20, everyMs: 100) {
                try await service.entitlements("off-user").entitlement("premium")?["will_renew"] as? Bool == false
            })
            #expect(try await WebhookEventTests.events(service, user: "off-user").map(\.type) == ["initial_purchase", "cancellation"])
        }
    }

    @Test func theCatalogWithoutPrices() async throws {
        try await run { service, _ in
            let answer = try await service.request("GET", "/v1/products")
            #expect(answer.status == 200)
            let products = try #require(try answer.json()["products"] as? [[String: Any]])
            #expect(products.count == 5)
            #expect(products.allSatisfy { $0["price"] == nil && $0["price_currency"] == nil })
            let monthly = try #require(products.first { $0["product_id"] as? String == "com.example.premium.monthly" })
            #expect(monthly["type"] as? String == "auto_renewable")
            #expect(monthly["entitlements"] as? [String] == ["premium"])
            #expect(monthly["subscription_group"] as? String == "group.premium")
            let coins = try #require(products.first { $0["product_id"] as? String == "com.example.coins.100" })
            #expect(coins["currency"] as? String == "coins" && coins["amount"] as? Int == 100 && coins["entitlements"] as? [String] == [])
            let pass = try #require(products.first { $0["product_id"] as? String == "com.example.pass.month" })
            #expect(pass["duration"] as? String == "P1M")
            #expect(try await service.request("GET", "/v1/products", key: nil).status == 401)
        }
    }
}
