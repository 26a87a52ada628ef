import Foundation
@testable import AppStore

/// Payloads shaped like the App Store's (field names as in Apple's JSON), for the signed-data tests: the app is
/// `bundleID` / `appAppleID`, the environment Sandbox, signed an hour ago, unless `overrides` say otherwise (a
/// value of `NSNull()` sends `null`; `removing` drops keys).
enum SignedPayloads {
    static let bundleID = "com.example.app"
    static let appAppleID: Int64 = 1_234_567_890

    /// Milliseconds since 1970 of `date`.
    static func ms(_ date: Date) -> Double { (date.timeIntervalSince1970 * 1000).rounded() }

    static func transaction(_ overrides: [String: Any] = [:], removing: [String] = []) -> [String: Any] {
        let signed = ms(Date().addingTimeInterval(-3_600))
        return apply([
            "transactionId": "2000000812345678", "originalTransactionId": "2000000800000001", "bundleId": bundleID,
            "productId": "com.example.premium.monthly", "purchaseDate": signed - 60_000, "expiresDate": signed + 86_400_000 * 30,
            "quantity": 1, "type": "Auto-Renewable Subscription", "inAppOwnershipType": "PURCHASED", "signedDate": signed,
            "environment": "Sandbox",
        ], overrides, removing)
    }

    static func renewalInfo(_ overrides: [String: Any] = [:], removing: [String] = []) -> [String: Any] {
        apply([
            "originalTransactionId": "2000000800000001", "productId": "com.example.premium.monthly",
            "autoRenewProductId": "com.example.premium.monthly", "autoRenewStatus": 1,
            "signedDate": ms(Date().addingTimeInterval(-3_600)), "environment": "Sandbox",
        ], overrides, removing)
    }

    /// A notification whose `data` names the app (merged with `data`), plus `overrides` at the top level.
    static func notification(data: [String: Any] = [:], _ overrides: [String: Any] = [:], removing: [String] = []) -> [String: Any] {
        apply([
            "notificationType": "DID_RENEW", "notificationUUID": "002e14d5-51f5-4503-b5a8-c3a1af68eb20", "version": "2.0",
            "signedDate": ms(Date().addingTimeInterval(-3_600)),
            "data": apply(["appAppleId": appAppleID, "bundleId": bundleID, "environment": "Sandbox", "status": 1], data, []),
        ], overrides, removing)
    }

    static func appTransaction(_ overrides: [String: Any] = [:], removing: [String] = []) -> [String: Any] {
        let created = ms(Date().addingTimeInterval(-3_600))
        return apply([
            "receiptType": "Sandbox", "appAppleId": appAppleID, "bundleId": bundleID, "applicationVersion": "1",
            "receiptCreationDate": created, "originalPurchaseDate": created - 86_400_000, "originalApplicationVersion": "1",
            "appTransactionId": "704289572311518331",
        ], overrides, removing)
    }

    private static func apply(_ body: [String: Any], _ overrides: [String: Any], _ removing: [String]) -> [String: Any] {
        var body = body.merging(overrides) { $1 }
        for key in removing { body[key] = nil }
        return body
    }
}

extension SignedDataVerifier {
    /// A verifier for `SignedPayloads`' app trusting `chain`'s root.
    static func forTests(_ chain: TestSigningChain, environments: Set<SignedDataEnvironment> = [.production, .sandbox],
                        appAppleID: Int64? = SignedPayloads.appAppleID, now: @escaping @Sendable () -> Date = { Date() }) -> SignedDataVerifier {
        SignedDataVerifier(roots: [chain.root], bundleID: SignedPayloads.bundleID, appAppleID: appAppleID, environments: environments, now: now)
    }
}

/// The refusal `body` throws; nil when it accepts.
func refusal(_ body: () async throws(SignedDataError) -> Void) async -> SignedDataError? {
    do {
        try await body()
        return nil
    } catch {
        return error
    }
}
