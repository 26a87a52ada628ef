import ServiceRuntime
import Foundation

/// How a fake App Store behaves when it starts and after `POST /control/reset`; `PUT /control/config`
/// changes the first three settings while it runs.
public struct FakeAppStoreConfiguration: Sendable, Equatable {
    /// When set, a verifyReceipt request whose `password` is missing or different is answered `21004`.
    public var sharedSecret: String?
    /// How long every verifyReceipt answer waits (on a loop timer) before it goes out.
    public var latencyMs: Int
    /// When true, every verifyReceipt request is answered HTTP 503, as during an App Store outage.
    public var outage: Bool
    /// Where the `{"fixture": name}` steps of a scenario are read from.
    public var fixturesDirectory: String
    /// The `bundleId` of the StoreKit 2 payloads the fake signs.
    public var bundleID: String
    /// The `appAppleId` of the notifications the fake signs.
    public var appAppleID: Int64
    /// Where the signing chain is kept (`FakeSigningChain(directory:)`); nil makes a fresh one per start.
    public var signingDirectory: String?
    /// Where the command writes the root certificate at start (DER, or PEM for a `.pem` name).
    public var rootCertificateFile: String?
    /// The `.p8` (PEM, PKCS#8, P-256) whose key the fake's Server API accepts; created with a fresh key when
    /// the file does not exist. Nil: a fresh key per start (served at `GET /control/server-api`).
    public var apiKeyFile: String?
    /// The `kid` and `iss` the fake's Server API requires in a token.
    public var apiKeyID: String
    /// The `iss` a token must carry (`FAKE_APPLE_ISSUER_ID`; a fixed UUID by default).
    public var apiIssuerID: String

    /// The shared Apple samples beside the repository: `<repo>/../shared/fixtures/apple`.
    public static let defaultFixturesDirectory: String = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent()  // FakeAppStore
        .deletingLastPathComponent()  // Sources
        .deletingLastPathComponent()  // <repo>
        .deletingLastPathComponent()
        .appendingPathComponent("shared/fixtures/apple", isDirectory: true)
        .path

    /// The longest latency or step delay accepted: ten minutes.
    public static let maxDelayMs = 600_000

    /// A configuration with these values; the defaults answer at once without a secret and sign for
    /// `com.example.app`. Nothing is range-checked here, unlike `init(environment:)`.
    public init(sharedSecret: String? = nil, latencyMs: Int = 0, outage: Bool = false,
                fixturesDirectory: String = Self.defaultFixturesDirectory, bundleID: String = "com.example.app",
                appAppleID: Int64 = 1_234_567_890, signingDirectory: String? = nil, rootCertificateFile: String? = nil,
                apiKeyFile: String? = nil, apiKeyID: String = "FAKEKEY001", apiIssuerID: String = "5c6f1a0e-3b7d-4e52-9a8b-3f2d1c0e5b47") {
        self.sharedSecret = sharedSecret
        self.latencyMs = latencyMs
        self.outage = outage
        self.fixturesDirectory = fixturesDirectory
        self.bundleID = bundleID
        self.appAppleID = appAppleID
        self.signingDirectory = signingDirectory
        self.rootCertificateFile = rootCertificateFile
        self.apiKeyFile = apiKeyFile
        self.apiKeyID = apiKeyID
        self.apiIssuerID = apiIssuerID
    }

    /// Reads `FAKE_APPLE_SHARED_SECRET`, `FAKE_APPLE_LATENCY_MS` (0–600000), `FAKE_APPLE_OUTAGE` (`true`/`false`,
    /// `1`/`0`), `FAKE_APPLE_FIXTURES_DIR`, `FAKE_APPLE_BUNDLE_ID` (default `com.example.app`),
    /// `FAKE_APPLE_APP_APPLE_ID` (a positive integer, default 1234567890), `FAKE_APPLE_SIGNING_DIR`,
    /// `FAKE_APPLE_ROOT_CERTIFICATE_FILE`, `FAKE_APPLE_API_KEY_FILE`, `FAKE_APPLE_API_KEY_ID` (default
    /// `FAKEKEY001`) and `FAKE_APPLE_ISSUER_ID`; unset or empty variables keep the defaults. The secret is
    /// never echoed in an error.
    public init(environment: [String: String]) throws(ConfigurationError) {
        func value(_ name: String) -> String? {
            guard let raw = environment[name]?.trimmingCharacters(in: .whitespaces), !raw.isEmpty else { return nil }
            return raw
        }
        self.init()
        sharedSecret = value("FAKE_APPLE_SHARED_SECRET")
        if let raw = value("FAKE_APPLE_LATENCY_MS") {
            guard let latency = Int(raw), (0...Self.maxDelayMs).contains(latency) else {
                throw ConfigurationError(variable: "FAKE_APPLE_LATENCY_MS", problem: "expected an integer in 0...\(Self.maxDelayMs), got '\(raw)'")
            }
            latencyMs = latency
        }
        if let raw = value("FAKE_APPLE_OUTAGE") {
            switch raw.lowercased() {
            case "true", "1": outage = true
            case "false", "0": outage = false
            default: throw ConfigurationError(variable: "FAKE_APPLE_OUTAGE", problem: "expected true or false, got '\(raw)'")
            }
        }
        if let directory = value("FAKE_APPLE_FIXTURES_DIR") {
            fixturesDirectory = directory
        }
        if let bundle = value("FAKE_APPLE_BUNDLE_ID") {
            bundleID = bundle
        }
        if let raw = value("FAKE_APPLE_APP_APPLE_ID") {
            guard let id = Int64(raw), id > 0 else {
                throw ConfigurationError(variable: "FAKE_APPLE_APP_APPLE_ID", problem: "expected a positive integer, got '\(raw)'")
            }
            appAppleID = id
        }
        signingDirectory = value("FAKE_APPLE_SIGNING_DIR")
        rootCertificateFile = value("FAKE_APPLE_ROOT_CERTIFICATE_FILE")
        apiKeyFile = value("FAKE_APPLE_API_KEY_FILE")
        if let keyID = value("FAKE_APPLE_API_KEY_ID") { apiKeyID = keyID }
        if let issuerID = value("FAKE_APPLE_ISSUER_ID") { apiIssuerID = issuerID }
    }
}
