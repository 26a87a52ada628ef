import Foundation
import Testing
@testable import AppStore

/// What each kind of signed payload must name to be this app's, in Apple's order (bundle id, app Apple ID,
/// environment), and how Xcode and LocalTesting payloads are taken only where listed.
@Suite struct SignedDataKindTests {
    let chain: TestSigningChain
    let verifier: SignedDataVerifier

    init() throws {
        chain = try TestSigningChain()
        verifier = .forTests(chain)
    }

    private func transaction(_ payload: [String: Any], _ verifier: SignedDataVerifier? = nil) async throws -> SignedDataError? {
        let (verifier, jws) = (verifier ?? self.verifier, try chain.sign(payload))
        return await refusal { () async throws(SignedDataError) in _ = try await verifier.verifyTransaction(jws) }
    }

    private func notification(_ payload: [String: Any], _ verifier: SignedDataVerifier? = nil) async throws -> SignedDataError? {
        let (verifier, jws) = (verifier ?? self.verifier, try chain.sign(payload))
        return await refusal { () async throws(SignedDataError) in _ = try await verifier.verifyNotification(jws) }
    }

    private func appTransaction(_ payload: [String: Any], _ verifier: SignedDataVerifier? = nil) async throws -> SignedDataError? {
        let (verifier, jws) = (verifier ?? self.verifier, try chain.sign(payload))
        return await refusal { () async throws(SignedDataError) in _ = try await verifier.verifyAppTransaction(jws) }
    }

    @Test func aTransactionMustNameThisBundleThenAnAcceptedEnvironment() async throws {
        #expect(try await transaction(SignedPayloads.transaction()) == nil)
        #expect(try await transaction(SignedPayloads.transaction(["environment": "Production"])) == nil)
        for (overrides, removing, status) in [
            (["bundleId": "com.example.other"], [], SignedDataError.Status.invalidAppIdentifier),
            (["bundleId": "COM.EXAMPLE.APP"], [], .invalidAppIdentifier), ([:], ["bundleId"], .invalidAppIdentifier),
            (["bundleId": "com.example.other", "environment": "Production2"], [], .invalidAppIdentifier),
            (["environment": "sandbox"], [], .invalidEnvironment), (["environment": "Staging"], [], .invalidEnvironment),
            ([:], ["environment"], .invalidEnvironment), (["environment": "Xcode"], [], .invalidEnvironment),
        ] as [([String: Any], [String], SignedDataError.Status)] {
            #expect(try await transaction(SignedPayloads.transaction(overrides, removing: removing))?.status == status, "\(overrides) \(removing)")
        }
        let productionOnly = SignedDataVerifier.forTests(chain, environments: [.production])
        #expect(try await transaction(SignedPayloads.transaction(), productionOnly)?.status == .invalidEnvironment)
        let noBundle = SignedDataVerifier(roots: [chain.root], bundleID: nil, appAppleID: nil)
        #expect(try await transaction(SignedPayloads.transaction(), noBundle)?.status == .invalidAppIdentifier)
    }

    @Test func anAppAppleIDAPayloadCarriesMustBeThisAppsAndProductionNotificationsMustCarryIt() async throws {
        // Stricter than Apple (API.md): any payload carrying appAppleId is compared, in Sandbox too.
        #expect(try await transaction(SignedPayloads.transaction(["appAppleId": 999]))?.status == .invalidAppIdentifier)
        #expect(try await transaction(SignedPayloads.transaction(["appAppleId": SignedPayloads.appAppleID])) == nil)
        #expect(try await notification(SignedPayloads.notification(data: ["appAppleId": 999]))?.status == .invalidAppIdentifier)
        #expect(try await notification(SignedPayloads.notification(data: ["appAppleId": "1234567890"])) == nil)
        #expect(try await notification(SignedPayloads.notification(data: ["appAppleId": "twelve"]))?.status == .invalidAppIdentifier)
        // A Sandbox notification need not carry it; a Production one must.
        var sandbox = SignedPayloads.notification()
        sandbox["data"] = (sandbox["data"] as? [String: Any])?.filter { $0.key != "appAppleId" }
        #expect(try await notification(sandbox) == nil)
        var production = SignedPayloads.notification(data: ["environment": "Production"])
        #expect(try await notification(production) == nil)
        production["data"] = (production["data"] as? [String: Any])?.filter { $0.key != "appAppleId" }
        #expect(try await notification(production)?.status == .invalidAppIdentifier)
        // Without APPLE_APP_APPLE_ID nothing is compared, but Production notifications and app transactions are refused.
        let unconfigured = SignedDataVerifier.forTests(chain, appAppleID: nil)
        #expect(try await transaction(SignedPayloads.transaction(["appAppleId": 999, "environment": "Production"]), unconfigured) == nil)
        #expect(try await notification(SignedPayloads.notification(data: ["appAppleId": 999]), unconfigured) == nil)
        #expect(try await notification(SignedPayloads.notification(data: ["environment": "Production"]), unconfigured)?.status == .invalidAppIdentifier)
        #expect(try await appTransaction(SignedPayloads.appTransaction(["receiptType": "Production"]), unconfigured)?.status == .invalidAppIdentifier)
        #expect(try await appTransaction(SignedPayloads.appTransaction(), unconfigured) == nil)
    }

    @Test func renewalInfoNamesOnlyItsEnvironment() async throws {
        let renewal = { (payload: [String: Any], verifier: SignedDataVerifier) async throws -> SignedDataError? in
            let jws = try self.chain.sign(payload)
            return await refusal { () async throws(SignedDataError) in _ = try await verifier.verifyRenewalInfo(jws) }
        }
        let verified = try await verifier.verifyRenewalInfo(try chain.sign(SignedPayloads.renewalInfo()))
        #expect(verified.payload.renewal.willRenew)
        #expect(verified.environment == .sandbox)
        #expect(try await renewal(SignedPayloads.renewalInfo(["bundleId": "com.example.other"]), verifier) == nil)
        let otherApp = SignedDataVerifier(roots: [chain.root], bundleID: "com.example.other", appAppleID: nil)
        #expect(try await renewal(SignedPayloads.renewalInfo(), otherApp) == nil)
        #expect(try await renewal(SignedPayloads.renewalInfo(["environment": "Production"]), .forTests(chain, environments: [.sandbox]))?.status == .invalidEnvironment)
        #expect(try await renewal(SignedPayloads.renewalInfo(removing: ["environment"]), verifier)?.status == .invalidEnvironment)
    }

    @Test func aNotificationNamesItsAppInDataElseSummaryElseExternalPurchaseTokenElseAppData() async throws {
        let verified = try await verifier.verifyNotification(try chain.sign(SignedPayloads.notification()))
        #expect(verified.payload.notificationType == "DID_RENEW")
        #expect(verified.signedDate != nil)
        let part = ["bundleId": SignedPayloads.bundleID, "environment": "Sandbox", "appAppleId": SignedPayloads.appAppleID] as [String: Any]
        for key in ["summary", "appData"] {
            #expect(try await notification(SignedPayloads.notification([key: part], removing: ["data"])) == nil, "\(key)")
        }
        let token = ["bundleId": SignedPayloads.bundleID, "appAppleId": SignedPayloads.appAppleID, "externalPurchaseId": "SANDBOX_b2158121"] as [String: Any]
        #expect(try await notification(SignedPayloads.notification(["externalPurchaseToken": token], removing: ["data"])) == nil)
        var production = token
        production["externalPurchaseId"] = "b2158121"
        #expect(try await notification(SignedPayloads.notification(["externalPurchaseToken": production], removing: ["data"]),
                                       .forTests(chain, environments: [.sandbox]))?.status == .invalidEnvironment)
        // data first: a foreign bundle there is not saved by a right one in summary.
        #expect(try await notification(SignedPayloads.notification(data: ["bundleId": "com.example.other"], ["summary": part]))?.status == .invalidAppIdentifier)
        #expect(try await notification(SignedPayloads.notification(["data": NSNull(), "summary": part])) == nil)
        #expect(try await notification(SignedPayloads.notification(removing: ["data"]))?.status == .invalidAppIdentifier)
        #expect(try await notification(SignedPayloads.notification(data: ["environment": "Production"]), .forTests(chain, environments: [.sandbox]))?.status == .invalidEnvironment)
        #expect(try await notification(SignedPayloads.notification(data: ["bundleId": "x", "environment": "x"]))?.status == .invalidAppIdentifier)
    }

    @Test func aNotificationsNestedPayloadsAreLeftToTheirOwnVerification() async throws {
        let nested = SignedPayloads.notification(data: ["signedTransactionInfo": "not even a JWS", "signedRenewalInfo": "eyJ.eyJ.sig"])
        let verified = try await verifier.verifyNotification(try chain.sign(nested))
        #expect(verified.payload.signedTransactionInfo == "not even a JWS")
        await #expect(throws: SignedDataError.self) { try await verifier.verifyTransaction(verified.payload.signedTransactionInfo ?? "") }
    }

    @Test func anAppTransactionNamesItsEnvironmentAsReceiptTypeAndIsValidatedAtItsCreationDate() async throws {
        let verified = try await verifier.verifyAppTransaction(try chain.sign(SignedPayloads.appTransaction()))
        #expect(verified.payload.bundleID == SignedPayloads.bundleID)
        #expect(verified.payload.appAppleID == SignedPayloads.appAppleID)
        #expect(verified.payload.appTransactionID == "704289572311518331")
        #expect(verified.environment == .sandbox && verified.signedDate == nil)
        #expect(try await appTransaction(SignedPayloads.appTransaction(["bundleId": "com.example.other"]))?.status == .invalidAppIdentifier)
        #expect(try await appTransaction(SignedPayloads.appTransaction(["receiptType": "Production"])) == nil)
        #expect(try await appTransaction(SignedPayloads.appTransaction(["receiptType": "Production", "appAppleId": 999]))?.status == .invalidAppIdentifier)
        #expect(try await appTransaction(SignedPayloads.appTransaction(["receiptType": "Production"]), .forTests(chain, environments: [.sandbox]))?.status == .invalidEnvironment)
        #expect(try await appTransaction(SignedPayloads.appTransaction(removing: ["receiptType"]))?.status == .invalidEnvironment)
    }

    @Test func xcodeAndLocalTestingPayloadsAreReadUnverifiedOnlyWhereListed() async throws {
        let xcode = SignedPayloads.transaction(["environment": "Xcode", "transactionId": "0", "originalTransactionId": "0"])
        let unsigned = try TestSigningChain.unsigned(xcode)
        let selfSigned = try chain.sign(xcode, header: ["alg": "ES256", "x5c": [try TestSigningChain.x5c(chain.leaf)], "kid": "Apple_Xcode_Key"])
        let listed = SignedDataVerifier.forTests(chain, environments: [.production, .sandbox, .xcode])
        for jws in [unsigned, selfSigned] {
            let verified = try await listed.verifyTransaction(jws)
            #expect(verified.environment == .xcode && verified.payload.transaction.transactionID == "0")
            #expect(await refusal { () async throws(SignedDataError) in _ = try await verifier.verifyTransaction(jws) } != nil)
        }
        // Listed, the bundle id is still this app's and the environment one of the listed.
        let otherApp = try TestSigningChain.unsigned(SignedPayloads.transaction(["environment": "Xcode", "bundleId": "com.example.other"]))
        #expect(await refusal { () async throws(SignedDataError) in _ = try await listed.verifyTransaction(otherApp) }?.status == .invalidAppIdentifier)
        let localTesting = try TestSigningChain.unsigned(SignedPayloads.transaction(["environment": "LocalTesting"]))
        #expect(await refusal { () async throws(SignedDataError) in _ = try await listed.verifyTransaction(localTesting) } != nil)
        #expect(await refusal { () async throws(SignedDataError) in _ = try await listed.verifyTransaction("not a jws") }?.status == .verificationFailure)
        // Listing Xcode never lets an unsigned payload pass as Production or Sandbox.
        for environment in ["Production", "Sandbox"] {
            let forged = try TestSigningChain.unsigned(SignedPayloads.transaction(["environment": environment]))
            #expect(await refusal { () async throws(SignedDataError) in _ = try await listed.verifyTransaction(forged) }?.status == .verificationFailure)
        }
        // The other kinds too.
        let onlyLocal = SignedDataVerifier.forTests(chain, environments: [.localTesting])
        let renewal = try TestSigningChain.unsigned(SignedPayloads.renewalInfo(["environment": "LocalTesting"]))
        #expect(try await onlyLocal.verifyRenewalInfo(renewal).environment == .localTesting)
        let app = try TestSigningChain.unsigned(SignedPayloads.appTransaction(["receiptType": "LocalTesting"], removing: ["appAppleId"]))
        #expect(try await onlyLocal.verifyAppTransaction(app).environment == .localTesting)
        let notification = try TestSigningChain.unsigned(SignedPayloads.notification(data: ["environment": "LocalTesting"]))
        #expect(try await onlyLocal.verifyNotification(notification).environment == .localTesting)
        // Configured for LocalTesting alone, a payload of another environment gets Apple's verdict: the environment.
        #expect(await refusal { () async throws(SignedDataError) in _ = try await onlyLocal.verifyTransaction(unsigned) }?.status == .invalidEnvironment)
    }

    @Test func theEnvironmentListReadsExactNames() {
        #expect(SignedDataEnvironment.list("Production,Sandbox") == [.production, .sandbox])
        #expect(SignedDataEnvironment.list(" Xcode , LocalTesting,Sandbox") == [.xcode, .localTesting, .sandbox])
        for bad in ["", ",", "Production,", "production", "Sandbox,Staging"] {
            #expect(SignedDataEnvironment.list(bad) == nil, "\(bad)")
        }
    }
}
