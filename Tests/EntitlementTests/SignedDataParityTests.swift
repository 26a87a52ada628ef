import Foundation
import Testing
import X509
@testable import AppStore

/// Our `SignedDataVerifier` against the verdicts of Apple's own `SignedDataVerifier` (app-store-server-library,
/// Python) on the cases `scripts/signed-parity/run.sh` writes: generated payloads and chains, broken every way
/// the harness knows, and every signed payload of the shared fixtures. Each case is verified with the
/// configuration Apple's verifier had (its roots, bundle id, app Apple ID, its one environment as the only
/// accepted one) at the current time. What Apple refuses we refuse, with the same status; what Apple accepts we
/// accept; the cases named below are the only exceptions, each for the reason given.
///
/// `scripts/test.sh` runs the harness and names its output in `SIGNED_PARITY_CASES`; without it the test fails.
@Suite struct SignedDataParityTests {
    /// One case of cases.json (scripts/signed-parity/README.md).
    struct Case: Decodable, Sendable {
        var name: String
        var kind: String
        var jws: String
        var roots: [String]
        var bundleID: String?
        var appAppleID: Int64?
        var environment: String
        var appleVerdict: String

        private enum CodingKeys: String, CodingKey {
            case name, kind, jws, roots, environment
            case bundleID = "bundle_id", appAppleID = "app_apple_id", appleVerdict = "apple_verdict"
        }
    }

    /// Cases Apple accepts and we refuse, on purpose.
    static let stricterThanApple: [String: String] = [
        "signature_with_base64_padding":
            "JWS segments are unpadded base64url (RFC 7515 §2); PyJWT's acceptance of '=' is a Python quirk",
        "leaf_signed_directly_by_root_that_carries_intermediate_marker":
            "the path must be leaf, intermediate, root, as Apple's Swift library requires; the Python library checks the marker on whatever OpenSSL built",
        "transaction_production_foreign_app_apple_id_in_payload":
            "API.md: appAppleId = APPLE_APP_APPLE_ID wherever a payload carries one; Apple compares it on Production notifications and app transactions only",
        "notification_sandbox_wrong_app_apple_id": "the same appAppleId rule, on a Sandbox notification",
        "app_transaction_sandbox_wrong_app_apple_id": "the same appAppleId rule, on a Sandbox app transaction",
    ]

    /// Cases where Apple refuses the configuration itself, not the payload.
    static let configurationsAppleRefuses: [String: String] = [
        "config_production_without_app_apple_id":
            "Apple's constructor refuses Production without an app Apple ID; we run, and refuse the payloads whose check needs it "
            + "(Production notifications and app transactions, see `withoutAnAppAppleIDProductionNotificationsAreRefused`); "
            + "a transaction is never compared with it by Apple",
    ]

    /// Apple's verdicts as our statuses.
    static let statuses: [String: SignedDataError.Status] = [
        "VERIFICATION_FAILURE": .verificationFailure, "INVALID_CHAIN_LENGTH": .invalidChainLength,
        "INVALID_CERTIFICATE": .invalidCertificate, "INVALID_APP_IDENTIFIER": .invalidAppIdentifier,
        "INVALID_ENVIRONMENT": .invalidEnvironment, "EXCEPTION:ClassValidationError": .undecodablePayload,
    ]

    /// The harness's cases; throws (failing the test) when the test command did not produce them.
    static func cases() throws -> [Case] {
        guard let path = ProcessInfo.processInfo.environment["SIGNED_PARITY_CASES"], !path.isEmpty else {
            throw ParityCasesMissing()
        }
        struct File: Decodable { var cases: [Case] }
        let cases = try JSONDecoder().decode(File.self, from: Data(contentsOf: URL(fileURLWithPath: path))).cases
        // The harness writes ~180 cases; far fewer means it broke, and a parity test over nothing proves nothing.
        try #require(cases.count >= 150, "only \(cases.count) cases in \(path)")
        return cases
    }

    struct ParityCasesMissing: Error, CustomStringConvertible {
        var description: String {
            "SIGNED_PARITY_CASES is not set: run the tests through scripts/test.sh, which first runs scripts/signed-parity/run.sh "
                + "(Apple's own verifier) and names its cases.json there"
        }
    }

    /// Our verdict on `entry`, configured as Apple's verifier was for it (or with `appAppleID` instead).
    static func verdict(_ entry: Case, appAppleID: Int64?? = nil) async throws -> Result<Void, SignedDataError> {
        let roots = try entry.roots.map { try Certificate(derEncoded: Array(try #require(Data(base64Encoded: $0)))) }
        let environment = try #require(SignedDataEnvironment(rawValue: entry.environment))
        let verifier = SignedDataVerifier(roots: roots, bundleID: entry.bundleID, appAppleID: appAppleID ?? entry.appAppleID,
                                          environments: [environment])
        do {
            switch entry.kind {
            case "transaction": _ = try await verifier.verifyTransaction(entry.jws)
            case "renewal_info": _ = try await verifier.verifyRenewalInfo(entry.jws)
            case "notification": _ = try await verifier.verifyNotification(entry.jws)
            case "app_transaction": _ = try await verifier.verifyAppTransaction(entry.jws)
            default: Issue.record("\(entry.name): unknown kind \(entry.kind)")
            }
            return .success(())
        } catch {
            return .failure(error)
        }
    }

    @Test func everyCaseGetsApplesVerdictSaveTheNamedOnes() async throws {
        let cases = try Self.cases()
        let names = Set(cases.map(\.name))
        for name in Self.stricterThanApple.keys.sorted() + Self.configurationsAppleRefuses.keys.sorted() {
            #expect(names.contains(name), "\(name) is named here but is no longer one of the harness's cases")
        }
        var agreements = 0, accepted = 0
        for entry in cases {
            let ours = try await Self.verdict(entry)
            let shown: String
            switch ours {
            case .success: shown = "OK"
            case .failure(let error): shown = "\(error.status.rawValue) (\(error.reason))"
            }
            if let why = Self.stricterThanApple[entry.name] {
                #expect(entry.appleVerdict == "OK", "\(entry.name): Apple now says \(entry.appleVerdict); the exception (\(why)) is stale")
                #expect(throws: SignedDataError.self, "\(entry.name): we accept, yet it is listed as refused on purpose") { try ours.get() }
            } else if let why = Self.configurationsAppleRefuses[entry.name] {
                #expect(entry.appleVerdict == "EXCEPTION:ValueError", "\(entry.name): Apple now says \(entry.appleVerdict); the exception (\(why)) is stale")
            } else if entry.appleVerdict == "OK" {
                #expect(shown == "OK", "\(entry.name): Apple accepts, we say \(shown)")
                if case .success = ours { agreements += 1; accepted += 1 }
            } else {
                let status = try #require(Self.statuses[entry.appleVerdict], "\(entry.name): Apple's verdict \(entry.appleVerdict) has no status of ours")
                #expect(throws: SignedDataError.self, "\(entry.name): Apple refuses (\(entry.appleVerdict)), we accept") { try ours.get() }
                if case .failure(let error) = ours {
                    #expect(error.status == status, "\(entry.name): Apple says \(entry.appleVerdict), we say \(shown)")
                    if error.status == status { agreements += 1 }
                }
            }
        }
        let named = Self.stricterThanApple.count + Self.configurationsAppleRefuses.count
        print("signed parity: \(cases.count) cases, \(agreements) with Apple's verdict and status (\(accepted) accepted), "
              + "\(named) named differences (\(Self.stricterThanApple.count) stricter, \(Self.configurationsAppleRefuses.count) configuration)")
        #expect(agreements + named == cases.count)
    }

    /// What Apple's constructor guards against when it refuses Production without an app Apple ID: we accept the
    /// configuration and refuse, instead, each Production payload that must be compared with the ID.
    @Test func withoutAnAppAppleIDProductionNotificationsAreRefused() async throws {
        let cases = Dictionary(uniqueKeysWithValues: try Self.cases().map { ($0.name, $0) })
        for name in ["notification_production_valid", "app_transaction_production_valid"] {
            let entry = try #require(cases[name])
            #expect(entry.appleVerdict == "OK")
            let configured = try await Self.verdict(entry)
            #expect(throws: Never.self) { try configured.get() }
            let withoutID = try await Self.verdict(entry, appAppleID: .some(nil))
            #expect(throws: SignedDataError(.invalidAppIdentifier, "APPLE_APP_APPLE_ID is not configured, and a Production payload of this kind must carry it")) {
                try withoutID.get()
            }
        }
    }
}
