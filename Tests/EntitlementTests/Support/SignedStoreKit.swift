import Foundation
@testable import EntitlementService
@testable import ServiceRuntime

/// StoreKit 2 payloads shaped like the App Store's (`JWSTransactionDecodedPayload`, `JWSRenewalInfoDecodedPayload`,
/// `ResponseBodyV2DecodedPayload`), signed by a test chain whose root the service is told to trust. Immutable once
/// made (the chain's keys and signer included), so shared across tasks freely.
struct SignedStoreKit: @unchecked Sendable {
    let chain: TestSigningChain
    /// The root's DER file, for `APPLE_ROOT_CERTIFICATES`.
    let rootFile: String
    static let appAppleID: Int64 = 1_234_567_890

    init() throws {
        chain = try TestSigningChain()
        rootFile = try chain.writeRoot()
    }

    /// The service environment that trusts this chain and names the test app.
    var environment: [String: String] {
        ["APPLE_ROOT_CERTIFICATES": rootFile, "APPLE_APP_APPLE_ID": String(Self.appAppleID)]
    }

    static func milliseconds(_ date: Date) -> Int64 { Int64((date.timeIntervalSince1970 * 1000).rounded()) }

    /// Apple's `type` for each product type of the test catalog.
    enum Kind: String {
        case autoRenewable = "Auto-Renewable Subscription", nonRenewing = "Non-Renewing Subscription"
        case consumable = "Consumable", nonConsumable = "Non-Consumable"
    }

    /// A transaction's payload, before signing.
    struct Transaction {
        var id: String
        var originalID: String?
        var productID: String
        var kind: Kind
        var purchased: Date
        var expires: Date? = nil
        var revoked: Date? = nil
        var appAccountToken: String? = nil
        var quantity = 1
        var environment = "Production"
        /// Apple's `inAppOwnershipType`: `PURCHASED` or `FAMILY_SHARED`.
        var ownership = "PURCHASED"
        var bundleID = ServiceHarness.bundleID
        var signed: Date

        var payload: [String: Any] {
            var payload: [String: Any] = [
                "transactionId": id, "originalTransactionId": originalID ?? id, "productId": productID, "type": kind.rawValue,
                "purchaseDate": milliseconds(purchased), "originalPurchaseDate": milliseconds(purchased), "bundleId": bundleID,
                "environment": environment, "inAppOwnershipType": ownership, "quantity": quantity,
                "signedDate": milliseconds(signed), "storefront": "USA", "transactionReason": "PURCHASE",
            ]
            payload["expiresDate"] = expires.map(milliseconds)
            payload["revocationDate"] = revoked.map(milliseconds)
            payload["revocationReason"] = revoked.map { _ in 0 }
            payload["appAccountToken"] = appAccountToken
            if kind == .autoRenewable {
                payload["subscriptionGroupIdentifier"] = "21000000"
                payload["webOrderLineItemId"] = "w-" + id
            }
            return payload
        }
    }

    func sign(_ transaction: Transaction) throws -> String {
        try chain.sign(transaction.payload)
    }

    /// Signed renewal info of a subscription.
    func renewal(originalID: String, productID: String, autoRenew: Bool, billingRetry: Bool = false, gracePeriodExpires: Date? = nil,
                 expirationIntent: Int? = nil, environment: String = "Production", signed: Date) throws -> String {
        try chain.sign(Self.renewalPayload(originalID: originalID, productID: productID, autoRenew: autoRenew, billingRetry: billingRetry,
                                           gracePeriodExpires: gracePeriodExpires, expirationIntent: expirationIntent,
                                           environment: environment, signed: signed))
    }

    /// Renewal info's payload, before signing.
    static func renewalPayload(originalID: String, productID: String, autoRenew: Bool, billingRetry: Bool = false, gracePeriodExpires: Date? = nil,
                               expirationIntent: Int? = nil, environment: String = "Production", signed: Date) -> [String: Any] {
        var payload: [String: Any] = [
            "originalTransactionId": originalID, "productId": productID, "autoRenewProductId": productID,
            "autoRenewStatus": autoRenew ? 1 : 0, "isInBillingRetryPeriod": billingRetry, "environment": environment,
            "signedDate": Self.milliseconds(signed), "recentSubscriptionStartDate": Self.milliseconds(signed),
        ]
        payload["gracePeriodExpiresDate"] = gracePeriodExpires.map(Self.milliseconds)
        payload["expirationIntent"] = expirationIntent
        return payload
    }

    /// The body Apple posts: `{"signedPayload": …}` for a V2 notification with the given signed parts.
    func notification(_ type: String, subtype: String? = nil, uuid: String = UUID().uuidString.lowercased(), signed: Date,
                      transaction: String?, renewal: String? = nil, environment: String = "Production") throws -> String {
        var data: [String: Any] = ["bundleId": ServiceHarness.bundleID, "environment": environment, "appAppleId": Self.appAppleID,
                                   "bundleVersion": "1.0"]
        data["signedTransactionInfo"] = transaction
        data["signedRenewalInfo"] = renewal
        var payload: [String: Any] = ["notificationType": type, "notificationUUID": uuid, "version": "2.0",
                                      "signedDate": Self.milliseconds(signed), "data": data]
        payload["subtype"] = subtype
        return String(decoding: try JSONSerialization.data(withJSONObject: ["signedPayload": try chain.sign(payload)]), as: UTF8.self)
    }

    func removeRoot() {
        try? FileManager.default.removeItem(atPath: rootFile)
    }
}

extension SignedStoreKit.Transaction {
    /// A transaction of the test catalog's monthly subscription (`com.example.premium.monthly`) lasting `days` from
    /// `purchased`; `shared` makes it a family member's (`FAMILY_SHARED`).
    static func monthly(_ id: String, original: String? = nil, purchased: Date, days: Double = 30, revoked: Date? = nil,
                        token: String? = nil, shared: Bool = false, signed: Date) -> Self {
        .init(id: id, originalID: original, productID: "com.example.premium.monthly", kind: .autoRenewable, purchased: purchased,
              expires: purchased.addingTimeInterval(days * 86_400), revoked: revoked, appAccountToken: token,
              ownership: shared ? "FAMILY_SHARED" : "PURCHASED", signed: signed)
    }
}

extension ServiceHarness {
    /// Runs `body` against a service that trusts a fresh test signing chain (its root file removed afterwards).
    static func runSigned(_ body: (ServiceHarness, SignedStoreKit) async throws -> Void) async throws {
        let storeKit = try SignedStoreKit()
        defer { storeKit.removeRoot() }
        try await run(storeKit.environment) { try await body($0, storeKit) }
    }

    /// Posts signed transactions for `userID`: one as `signed_transaction`, or a list as `signed_transactions`.
    nonisolated func postSigned(_ jws: [String], for userID: String, asList: Bool = false, orderID: String? = nil) async throws -> RawHTTPClient.Response {
        var body: [String: Any] = ["user_id": userID]
        if asList || jws.count != 1 { body["signed_transactions"] = jws } else { body["signed_transaction"] = jws[0] }
        body["order_id"] = orderID
        let json = String(decoding: try JSONSerialization.data(withJSONObject: body), as: UTF8.self)
        return try await request("POST", "/v1/transactions", json: json)
    }

    /// Posts a notification body the way Apple does (no key).
    nonisolated func notify(_ body: String) async throws -> RawHTTPClient.Response {
        try await request("POST", "/v1/notifications/app-store", json: body, key: nil)
    }

    /// The stored notification's state and user.
    func notificationState(_ uuid: String) async throws -> (state: String, userID: String?)? {
        try await sql("SELECT state, user_id FROM app_store_notifications WHERE notification_uuid = $1", [uuid]).first
            .map { (try $0.string("state"), try $0.optionalString("user_id")) }
    }
}

extension JSONValue {
    /// The elements of an array value; nil for anything else.
    var arrayValue: [JSONValue]? {
        if case .array(let elements) = self { elements } else { nil }
    }
}
