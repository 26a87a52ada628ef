import EntitlementModel
import Foundation
import Testing
@testable import AppStore

/// The App Store Server API's bodies decoded by the model (Apple's own answers from the fixtures, and the
/// documented shapes of the others), the endpoints' budget, and the token's claims: pure.
@Suite struct ServerAPIResponseTests {
    @Test func allSubscriptionStatusesFixtureDecodesAndItsSignedFieldsVerify() async throws {
        let body = try ServerAPIResponse.Statuses(jsonData: Fixtures.data("api_response_all_subscription_statuses_expired_sandbox_omnimind.json"))
        #expect(body.environment == .sandbox && body.bundleID == "com.test.app" && body.appAppleID == nil)
        let group = try #require(body.data.first)
        #expect(body.data.count == 1 && group.subscriptionGroupIdentifier == "20900603")
        let item = try #require(group.lastTransactions.first)
        #expect(item.status == 2 && AppStoreSubscriptionStatus(rawValue: 2) == .expired)
        #expect(item.originalTransactionID == "1000000906235058")
        // Apple signed them in 2021, before payloads named their environment: Apple's library refuses them for
        // that (INVALID_ENVIRONMENT), and so does ours (or for their anonymised bundle id), while their
        // signatures and chains verify.
        let verifier = serverAPIVerifier(roots: [AppleRootCertificate.g3], bundleID: "com.test.app")
        try await expectRefusedForTheirEnvironmentOnly(#require(item.signedTransactionInfo), kind: .transaction, verifier)
        try await expectRefusedForTheirEnvironmentOnly(#require(item.signedRenewalInfo), kind: .renewalInfo, verifier)
        let transaction = try AppStoreTransactionV2(jsonData: CompactJWS(#require(item.signedTransactionInfo)).payload)
        #expect(transaction.transaction.originalTransactionID == "1000000906235058")
        let renewal = try AppStoreRenewalInfoV2(jsonData: CompactJWS(#require(item.signedRenewalInfo)).payload)
        #expect(renewal.renewal.originalTransactionID == "1000000906235058" && !renewal.renewal.willRenew && renewal.renewal.expirationIntent == 1)
    }

    @Test func transactionHistoryFixtureDecodesAndItsSignedTransactionsVerify() async throws {
        let body = try ServerAPIResponse.History(jsonData: Fixtures.data("api_response_transaction_history_sandbox_omnimind.json"))
        #expect(body.revision == "1636461115000_1000000907164221" && body.hasMore && body.environment == .sandbox)
        #expect(body.bundleID == "com.test.app" && body.signedTransactions.count == 5)
        let verifier = serverAPIVerifier(roots: [AppleRootCertificate.g3], bundleID: "com.test.app")
        var originals: Set<String> = []
        for jws in body.signedTransactions {
            try await expectRefusedForTheirEnvironmentOnly(jws, kind: .transaction, verifier)
            originals.insert(try AppStoreTransactionV2(jsonData: CompactJWS(jws).payload).transaction.originalTransactionID)
        }
        #expect(originals.count == 1)
    }

    @Test func documentedBodiesDecode() throws {
        let info = try ServerAPIResponse.TransactionInfo(jsonData: Data(#"{"signedTransactionInfo":"a.b.c"}"#.utf8))
        #expect(info.signedTransactionInfo == "a.b.c")
        #expect(throws: AppStoreDecodingError.self) { try ServerAPIResponse.TransactionInfo(jsonData: Data("{}".utf8)) }

        let valid = try ServerAPIResponse.OrderLookup(jsonData: Data(#"{"status":0,"signedTransactions":["x.y.z","u.v.w"]}"#.utf8))
        #expect(valid.status == 0 && valid.signedTransactions == ["x.y.z", "u.v.w"])
        let invalid = try ServerAPIResponse.OrderLookup(jsonData: Data(#"{"status":1}"#.utf8))
        #expect(invalid.status == ServerAPIResponse.OrderLookup.invalid && invalid.signedTransactions.isEmpty)
        let missing = #expect(throws: AppStoreDecodingError.self) { try ServerAPIResponse.OrderLookup(jsonData: Data(#"{"signedTransactions":[]}"#.utf8)) }
        #expect(missing?.path == "status")

        let history = try ServerAPIResponse.NotificationHistory(jsonData: Data("""
            {"paginationToken":"45 67","hasMore":true,"notificationHistory":[{"signedPayload":"p.q.r","sendAttempts":[
             {"attemptDate":1698148900000,"sendAttemptResult":"NO_RESPONSE"},{"attemptDate":1698148950000,"sendAttemptResult":"SUCCESS"}]}]}
            """.utf8))
        #expect(history.paginationToken == "45 67" && history.hasMore)
        let item = try #require(history.notificationHistory.first)
        #expect(item.signedPayload == "p.q.r" && item.sendAttempts.map(\.sendAttemptResult) == ["NO_RESPONSE", "SUCCESS"])
        #expect(item.sendAttempts.first?.attemptDate == Date(timeIntervalSince1970: 1_698_148_900))
        let last = try ServerAPIResponse.NotificationHistory(jsonData: Data(#"{"hasMore":false,"notificationHistory":[]}"#.utf8))
        #expect(!last.hasMore && last.paginationToken == nil && last.notificationHistory.isEmpty)

        let error = try ServerAPIResponse.ErrorBody(jsonData: Data(#"{"errorCode":4040010,"errorMessage":"Transaction id not found."}"#.utf8))
        #expect(error.errorCode == 4_040_010 && error.errorMessage == "Transaction id not found.")
        #expect(ServerAPIResponse.ErrorBody.errorCode(in: Data("<html>Service Unavailable</html>".utf8)) == nil)
    }

    @Test func everyEndpointStaysBelowApplesLimitInEachEnvironment() {
        for endpoint in ServerAPIEndpoint.allCases {
            let production = endpoint.allowance(in: .production), sandbox = endpoint.allowance(in: .sandbox)
            // A full bucket spent at once plus a second of refill never passes Apple's limit for a second.
            #expect(production.ratePerSecond + production.burst <= endpoint.appleRatePerSecond)
            #expect(sandbox.ratePerSecond < endpoint.appleRatePerSecond / 10 && sandbox.burst == 1)
            #expect(ServerAPIEndpoint.allowances[endpoint.budgetKey(in: .sandbox)] == sandbox)
        }
        #expect(ServerAPIEndpoint.orderLookup.allowance(in: .production).ratePerSecond == 8)
        #expect(Set(ServerAPIEndpoint.allowances.keys).count == ServerAPIEndpoint.allCases.count * 2)
    }

    // MARK: - The token's claims

    @Test func aTokenReadBackHasItsClaims() throws {
        let now = Date(timeIntervalSince1970: 1_767_225_600.7)
        let token = ServerAPIToken(keyID: "2X9R4HXF34", issuerID: "57246542-96fe-1a63-e053-0824d011072a", bundleID: "com.example.app", now: now, lifetime: 300)
        let jws = try CompactJWS(token.signingInput + ".c2ln")
        #expect(jws.algorithm == "ES256" && jws.keyID == "2X9R4HXF34" && jws.type == "JWT")
        let claims = try JSONSerialization.jsonObject(with: jws.payload) as? [String: Any]
        #expect(claims?["aud"] as? String == "appstoreconnect-v1" && claims?["bid"] as? String == "com.example.app")
        #expect(claims?["iat"] as? Int == 1_767_225_600 && claims?["exp"] as? Int == 1_767_225_900)
        #expect(claims?["iss"] as? String == "57246542-96fe-1a63-e053-0824d011072a" && claims?.count == 5)
        let read = try ServerAPIToken(jws)
        #expect(read == token)
        #expect(read.refusal(now: now, bundleID: "com.example.app", issuerID: token.issuerID, keyID: token.keyID) == nil)
    }

    @Test func refusalsNameTheClaim() throws {
        let now = Date(timeIntervalSince1970: 1_767_225_600)
        func refusal(_ change: (inout ServerAPIToken) -> Void, at when: Date = now) -> String? {
            var token = ServerAPIToken(keyID: "K", issuerID: "I", bundleID: "com.example.app", now: now, lifetime: 300)
            change(&token)
            return token.refusal(now: when, bundleID: "com.example.app", issuerID: "I", keyID: "K", leeway: 0)
        }
        #expect(refusal { _ in } == nil)
        #expect(refusal { $0.algorithm = "HS256" }?.contains("ES256") == true)
        #expect(refusal { $0.keyID = "other" }?.contains("kid") == true)
        #expect(refusal { $0.issuerID = "other" }?.contains("iss") == true)
        #expect(refusal { $0.audience = "appstoreconnect-v2" }?.contains("aud") == true)
        #expect(refusal { $0.bundleID = "com.example.other" }?.contains("bid") == true)
        #expect(refusal({ _ in }, at: now.addingTimeInterval(300)) == "the token expired")
        #expect(refusal { $0.issuedAt = now.addingTimeInterval(10) }?.contains("iat") == true)
        #expect(refusal { $0.expiresAt = now.addingTimeInterval(3_601) }?.contains("60 minutes") == true)
        // Apple's own library sends no iat: then exp counts from now.
        #expect(refusal { $0.issuedAt = nil } == nil)
        #expect(refusal { $0.issuedAt = nil; $0.expiresAt = now.addingTimeInterval(3_700) }?.contains("60 minutes after now") == true)
    }

    @Test func malformedTokensAreRefusedWithTheReason() throws {
        func read(header: String, claims: String) throws -> ServerAPIToken {
            try ServerAPIToken(CompactJWS(CompactJWS.base64URL(Array(header.utf8)) + "." + CompactJWS.base64URL(Array(claims.utf8)) + ".c2ln"))
        }
        let header = #"{"alg":"ES256","kid":"K","typ":"JWT"}"#
        #expect(throws: ServerAPITokenError.self) { try read(header: #"{"alg":"ES256"}"#, claims: #"{"iss":"I","bid":"b","aud":"a","exp":1}"#) }
        #expect(throws: ServerAPITokenError.self) { try read(header: header, claims: #"{"iss":"I","bid":"b","aud":"a"}"#) }
        #expect(throws: ServerAPITokenError.self) { try read(header: header, claims: #"{"iss":"I","bid":"b","aud":"a","exp":"soon"}"#) }
        #expect(throws: ServerAPITokenError.self) { try read(header: header, claims: #"{"bid":"b","aud":"a","exp":1}"#) }
        #expect(throws: ServerAPITokenError.self) { try read(header: header, claims: #"[1]"#) }
        #expect(try read(header: header, claims: #"{"iss":"I","bid":"b","aud":"a","exp":1.5}"#).expiresAt == Date(timeIntervalSince1970: 1.5))
    }

    /// `jws` is refused for the app or environment it names (or does not name), never for its signature or chain.
    private func expectRefusedForTheirEnvironmentOnly(_ jws: String, kind: SignedFieldKind, _ verifier: some ServerAPISignatureChecking) async {
        do {
            _ = try await verifier.verifiedPayload(of: jws, kind: kind)
            Issue.record("a payload without an environment was accepted")
        } catch let error as SignedDataError {
            #expect(!error.isAuthenticityFailure && [.invalidEnvironment, .invalidAppIdentifier].contains(error.status), "\(error.reason)")
        } catch {
            Issue.record("unexpected \(error)")
        }
    }
}
