import Crypto
import Foundation
import Testing
@testable import AppStore
@testable import EntitlementService
@testable import ServiceRuntime

/// The App Store Server API's settings: all three key settings or none, the `.p8` read once and never echoed.
@Suite struct ServerAPIConfigurationTests {
    /// A temporary directory for key files, removed after `body`.
    static func withDirectory<T>(_ body: (URL) throws -> T) throws -> T {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("server-api-config-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        return try body(directory)
    }

    static func error(_ environment: [String: String]) -> ConfigurationError? {
        do {
            _ = try Configuration(environment: environment)
            return nil
        } catch {
            return error
        }
    }

    @Test func withoutAKeyTheAPIIsOffAndTheDefaultsHold() throws {
        let config = try Configuration(environment: [:])
        #expect(config.appleServerAPI.credentials == nil && ServerAPISettings(config) == nil)
        #expect(config.appleServerAPI.productionURL == "https://api.storekit.apple.com")
        #expect(config.appleServerAPI.sandboxURL == "https://api.storekit-sandbox.apple.com")
        #expect(config.appleServerAPI.notificationHistoryIntervalS == 3_600)
    }

    @Test func aKeyIsReadWithItsURLs() throws {
        try Self.withDirectory { directory in
            let key = P256.Signing.PrivateKey()
            let path = directory.appendingPathComponent("AuthKey_2X9R4HXF34.p8").path
            try Data(key.pemRepresentation.utf8).write(to: URL(fileURLWithPath: path))
            let config = try Configuration(environment: [
                "APPLE_ISSUER_ID": "57246542-96fe-1a63-e053-0824d011072a", "APPLE_KEY_ID": "2X9R4HXF34", "APPLE_PRIVATE_KEY_FILE": path,
                "APPLE_BUNDLE_ID": "com.example.app", "APPLE_API_URL_PRODUCTION": "http://127.0.0.1:9", "APPLE_API_URL_SANDBOX": "http://127.0.0.1:9/sandbox",
                "NOTIFICATION_HISTORY_INTERVAL_S": "60", "APPLE_TIMEOUT_MS": "2500",
            ])
            let settings = try #require(ServerAPISettings(config))
            #expect(settings.credentials.privateKey.rawRepresentation == key.rawRepresentation)
            #expect(settings.credentials.keyID == "2X9R4HXF34" && settings.credentials.bundleID == "com.example.app")
            #expect(settings.credentials.issuerID == "57246542-96fe-1a63-e053-0824d011072a")
            #expect(settings.productionURL == "http://127.0.0.1:9" && settings.sandboxURL == "http://127.0.0.1:9/sandbox")
            #expect(settings.timeoutMs == 2_500 && config.appleServerAPI.notificationHistoryIntervalS == 60)
        }
    }

    @Test func aPartialKeyStopsStartUpNamingWhatIsMissing() {
        let one = Self.error(["APPLE_KEY_ID": "2X9R4HXF34"])
        #expect(one?.variable == "APPLE_ISSUER_ID and APPLE_PRIVATE_KEY_FILE" && one?.description.contains("all three or none") == true)
        let two = Self.error(["APPLE_KEY_ID": "2X9R4HXF34", "APPLE_ISSUER_ID": "i"])
        #expect(two?.variable == "APPLE_PRIVATE_KEY_FILE" && two?.description.contains("is required with APPLE_ISSUER_ID and APPLE_KEY_ID") == true)
        #expect(Self.error(["APPLE_KEY_ID": "k", "APPLE_ISSUER_ID": "i", "APPLE_PRIVATE_KEY_FILE": "/nonexistent.p8"])?.variable == "APPLE_BUNDLE_ID")
        #expect(Self.error(["NOTIFICATION_HISTORY_INTERVAL_S": "0"])?.variable == "NOTIFICATION_HISTORY_INTERVAL_S")
        #expect(Self.error(["APPLE_API_URL_SANDBOX": "ftp://x"])?.variable == "APPLE_API_URL_SANDBOX")
    }

    @Test func anUnreadableOrInvalidKeyFileStopsStartUpWithoutPrintingIt() throws {
        try Self.withDirectory { directory in
            let base = ["APPLE_KEY_ID": "k", "APPLE_ISSUER_ID": "i", "APPLE_BUNDLE_ID": "com.example.app"]
            let missing = directory.appendingPathComponent("missing.p8").path
            let unreadable = Self.error(base.merging(["APPLE_PRIVATE_KEY_FILE": missing]) { $1 })
            #expect(unreadable?.variable == "APPLE_PRIVATE_KEY_FILE" && unreadable?.description.contains("\(missing)', which cannot be read") == true)

            let p384 = P384.Signing.PrivateKey().pemRepresentation
            let wrongCurve = directory.appendingPathComponent("p384.p8").path
            try Data(p384.utf8).write(to: URL(fileURLWithPath: wrongCurve))
            let curve = Self.error(base.merging(["APPLE_PRIVATE_KEY_FILE": wrongCurve]) { $1 })
            #expect(curve?.variable == "APPLE_PRIVATE_KEY_FILE" && curve?.description.contains("P-256") == true)
            let body = p384.split(separator: "\n").dropFirst().first.map(String.init) ?? "-"
            #expect(curve?.description.contains(body) == false && curve?.description.contains("\n") == false)

            let notPEM = directory.appendingPathComponent("key.txt").path
            try Data("MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQg".utf8).write(to: URL(fileURLWithPath: notPEM))
            let text = Self.error(base.merging(["APPLE_PRIVATE_KEY_FILE": notPEM]) { $1 })
            #expect(text?.description.contains("not a PEM file") == true && text?.description.contains("MIGHAgEA") == false)

            // The setting holding the key itself (its PEM, or its base64 alone) instead of a path: never echoed.
            let pem = P256.Signing.PrivateKey().pemRepresentation
            let keyBody = pem.split(separator: "\n").dropFirst().first.map(String.init) ?? "-"
            for value in [pem, keyBody, pem.replacingOccurrences(of: "\n", with: " ")] {
                let inline = Self.error(base.merging(["APPLE_PRIVATE_KEY_FILE": value]) { $1 })
                #expect(inline?.variable == "APPLE_PRIVATE_KEY_FILE" && inline?.description.contains("not shown") == true)
                #expect(inline?.description.contains(keyBody) == false && inline?.description.contains("\n") == false)
            }
        }
    }
}
