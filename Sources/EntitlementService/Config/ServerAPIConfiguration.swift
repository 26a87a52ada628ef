import AppStore
import ServiceRuntime

/// The App Store Server API settings: `APPLE_ISSUER_ID`, `APPLE_KEY_ID` and `APPLE_PRIVATE_KEY_FILE` (all three
/// or none; the key file read once, its contents never echoed), `APPLE_API_URL_PRODUCTION`,
/// `APPLE_API_URL_SANDBOX` and `NOTIFICATION_HISTORY_INTERVAL_S`.
struct ServerAPIConfiguration: Sendable {
    /// The key and the app it speaks for; nil when no key is configured (the API features answer 501).
    var credentials: ServerAPICredentials?
    var productionURL: String
    var sandboxURL: String
    /// How often missed notifications are fetched from Apple's notification history.
    var notificationHistoryIntervalS: Int

    static let keySettings = ["APPLE_ISSUER_ID", "APPLE_KEY_ID", "APPLE_PRIVATE_KEY_FILE"]

    /// Reads the settings; a partial key, a key without `APPLE_BUNDLE_ID`, or a key file that cannot be read
    /// or is not a P-256 PKCS#8 PEM stops start-up with one line naming what is wrong.
    init(_ reader: EnvironmentReader, bundleID: String?) throws(ConfigurationError) {
        productionURL = try reader.url("APPLE_API_URL_PRODUCTION", default: ServerAPISettings.productionDefault)
        sandboxURL = try reader.url("APPLE_API_URL_SANDBOX", default: ServerAPISettings.sandboxDefault)
        notificationHistoryIntervalS = try reader.int("NOTIFICATION_HISTORY_INTERVAL_S", default: 3_600, in: 1...604_800)
        let present = Self.keySettings.filter { reader.string($0) != nil }
        guard !present.isEmpty else { return }
        let missing = Self.keySettings.filter { !present.contains($0) }
        guard missing.isEmpty else {
            throw ConfigurationError(variable: missing.joined(separator: " and "), problem: "\(missing.count == 1 ? "is" : "are") required with "
                + present.joined(separator: " and ") + " (the App Store Server API key: all three or none)")
        }
        guard let bundleID else {
            throw ConfigurationError(variable: "APPLE_BUNDLE_ID", problem: "is required with the App Store Server API key")
        }
        do {
            credentials = ServerAPICredentials(
                issuerID: reader.string("APPLE_ISSUER_ID")!, keyID: reader.string("APPLE_KEY_ID")!, bundleID: bundleID,
                privateKey: try ServerAPICredentials.privateKey(pemFile: reader.string("APPLE_PRIVATE_KEY_FILE")!))
        } catch {
            throw ConfigurationError(variable: "APPLE_PRIVATE_KEY_FILE", problem: "names \(error.reason)")
        }
    }
}

extension ServerAPISettings {
    /// The client's settings of this configuration; nil without a key. A call's exchanges are bounded by
    /// `APPLE_TIMEOUT_MS`.
    init?(_ configuration: Configuration) {
        guard let credentials = configuration.appleServerAPI.credentials else { return nil }
        self.init(credentials: credentials, productionURL: configuration.appleServerAPI.productionURL,
                  sandboxURL: configuration.appleServerAPI.sandboxURL, timeoutMs: configuration.appleTimeoutMs)
    }
}
