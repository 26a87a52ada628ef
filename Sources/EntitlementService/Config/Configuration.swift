import AppStore
import EntitlementModel
import ServiceRuntime
import Foundation
import X509

/// What the process does with purchases that another user posts.
enum RestorePolicy: String, Sendable {
    /// The purchase moves to the user who posted it; the move is audited.
    case transfer
    /// The purchase stays with its first owner; the second poster gets 409.
    case keep
}

/// Everything the service reads from its environment, validated once at start-up.
///
/// A bad value stops start-up with one line naming the variable; secret values are never echoed.
struct Configuration: Sendable {
    var listenAddress: String
    var port: Int
    var databaseURL: String?
    var databasePoolSize: Int
    /// Connections of the pool that answers entitlement reads (`DATABASE_READ_POOL_SIZE`).
    var databaseReadPoolSize: Int
    var appleSharedSecret: String?
    var appleBundleID: String?
    var appleProductionURL: String
    var appleSandboxURL: String
    var appleTimeoutMs: Int
    var appleConnectTimeoutMs: Int
    /// CA bundle file trusted for the App Store's TLS; loaded once and cached by libcurl.
    var appleCABundle: String
    /// Trust anchors for every signed (JWS) payload, read once at start-up; Apple Root CA - G3 by default.
    var appleRootCertificates: [Certificate]
    /// The app's numeric Apple ID, compared with the `appAppleId` of signed payloads.
    var appleAppAppleID: Int64?
    /// The environments accepted in signed payloads; Production and Sandbox by default.
    var appleSignedEnvironments: Set<SignedDataEnvironment>
    var apiKeys: [String]
    var adminAPIKeys: [String]
    var productsFile: String?
    var restorePolicy: RestorePolicy
    var retryBaseMs: Int
    var retryMaxMs: Int
    var maxConnections: Int
    var migrationsDirectory: String?
    /// Users whose entitlements answer each process keeps (`EntitlementCache`); 0 disables the cache.
    var entitlementCacheSize: Int
    /// The App Store Server API: its key (when configured), URLs and the notification history interval.
    var appleServerAPI: ServerAPIConfiguration
    /// Where events are sent, and how; nil without `WEBHOOK_URL` (events are recorded, not sent).
    var webhooks: WebhookSettings?

    static let caBundleDefault = "/etc/ssl/certs/ca-certificates.crt"
    static let appleProductionDefault = "https://buy.itunes.apple.com/verifyReceipt"
    static let appleSandboxDefault = "https://sandbox.itunes.apple.com/verifyReceipt"

    /// Reads and validates `environment`; throws the first problem found.
    init(environment: [String: String]) throws(ConfigurationError) {
        let reader = EnvironmentReader(environment: environment)
        listenAddress = reader.string("LISTEN_ADDR") ?? "127.0.0.1"
        guard ListeningSocket.isAddressLiteral(listenAddress) else {
            throw ConfigurationError(variable: "LISTEN_ADDR", problem: "must be an IPv4 or IPv6 address (such as 127.0.0.1, 0.0.0.0 or ::)")
        }
        port = try reader.int("PORT", default: 8080, in: 0...65535)
        databaseURL = reader.string("DATABASE_URL")
        if let databaseURL, !PostgresConnection.acceptsConninfo(databaseURL) {
            // Not echoed: it may hold a password.
            throw ConfigurationError(variable: "DATABASE_URL", problem: "is not a libpq connection string (key=value pairs) or postgresql:// URI")
        }
        databasePoolSize = try reader.int("DATABASE_POOL_SIZE", default: 8, in: 1...500)
        databaseReadPoolSize = try reader.int("DATABASE_READ_POOL_SIZE", default: 2, in: 1...500)
        appleSharedSecret = reader.string("APPLE_SHARED_SECRET")
        appleBundleID = reader.string("APPLE_BUNDLE_ID")
        appleProductionURL = try reader.url("APPLE_VERIFY_URL_PRODUCTION", default: Self.appleProductionDefault)
        appleSandboxURL = try reader.url("APPLE_VERIFY_URL_SANDBOX", default: Self.appleSandboxDefault)
        appleTimeoutMs = try reader.int("APPLE_TIMEOUT_MS", default: 10_000, in: 1...600_000)
        appleConnectTimeoutMs = try reader.int("APPLE_CONNECT_TIMEOUT_MS", default: min(3_000, appleTimeoutMs), in: 1...600_000)
        appleCABundle = try reader.readableFile("APPLE_CA_BUNDLE", default: Self.caBundleDefault)
        appleRootCertificates = try reader.certificates("APPLE_ROOT_CERTIFICATES") ?? [AppleRootCertificate.g3]
        appleAppAppleID = try reader.string("APPLE_APP_APPLE_ID").map { raw throws(ConfigurationError) in
            guard let id = Int64(raw), id > 0 else {
                throw ConfigurationError(variable: "APPLE_APP_APPLE_ID", problem: "expected the app's numeric Apple ID, got '\(raw)'")
            }
            return id
        }
        appleSignedEnvironments = try reader.string("APPLE_SIGNED_ENVIRONMENTS").map { raw throws(ConfigurationError) in
            guard let environments = SignedDataEnvironment.list(raw) else {
                throw ConfigurationError(variable: "APPLE_SIGNED_ENVIRONMENTS",
                                         problem: "expected a comma-separated list of Production, Sandbox, Xcode, LocalTesting, got '\(raw)'")
            }
            return environments
        } ?? [.production, .sandbox]
        apiKeys = try reader.keys("API_KEYS")
        adminAPIKeys = try reader.keys("ADMIN_API_KEYS")
        productsFile = reader.string("PRODUCTS_FILE")
        let policy = reader.string("RESTORE_POLICY") ?? RestorePolicy.transfer.rawValue
        guard let restorePolicy = RestorePolicy(rawValue: policy) else {
            throw ConfigurationError(variable: "RESTORE_POLICY", problem: "expected transfer or keep, got '\(policy)'")
        }
        self.restorePolicy = restorePolicy
        retryBaseMs = try reader.int("RETRY_BASE_MS", default: 5_000, in: 1...86_400_000)
        retryMaxMs = try reader.int("RETRY_MAX_MS", default: 600_000, in: 1...86_400_000)
        guard retryMaxMs >= retryBaseMs else {
            throw ConfigurationError(variable: "RETRY_MAX_MS", problem: "must be at least RETRY_BASE_MS (\(retryBaseMs))")
        }
        maxConnections = try reader.int("MAX_CONNECTIONS", default: 4_096, in: 1...1_000_000)
        migrationsDirectory = reader.string("MIGRATIONS_DIR")
        entitlementCacheSize = try reader.int("ENTITLEMENT_CACHE_SIZE", default: 100_000, in: 0...10_000_000)
        appleServerAPI = try ServerAPIConfiguration(reader, bundleID: appleBundleID)
        webhooks = try WebhookSettings(reader)
    }

    /// Settings that are valid but leave part of the service unusable, for `serve` to warn about once at
    /// start-up. They name variables, never values.
    var warnings: [ConfigurationWarning] {
        var warnings: [ConfigurationWarning] = []
        if apiKeys.isEmpty {
            warnings.append(ConfigurationWarning(variable: "API_KEYS", problem: "is empty: every /v1 app route answers 401"))
        }
        if adminAPIKeys.isEmpty {
            warnings.append(ConfigurationWarning(variable: "ADMIN_API_KEYS", problem: "is empty: every /v1/admin route answers 401"))
        }
        if appleSharedSecret == nil {
            warnings.append(ConfigurationWarning(
                variable: "APPLE_SHARED_SECRET",
                problem: "is unset: Apple answers 21004 for subscription receipts and v1 notifications are refused"))
        }
        return warnings
    }

    /// Descriptors `serve` may hold besides its clients' connections: its database connections, and a margin for
    /// Apple's and webhook receivers' connections, the listener and files.
    var descriptorsBesidesClients: Int { databasePoolSize + databaseReadPoolSize + 1 + 512 }

    /// A warning when the process's open-file limit (`limit`, after raising it) cannot hold `MAX_CONNECTIONS`
    /// clients besides what else the service opens.
    func openFileWarning(limit: Int?) -> ConfigurationWarning? {
        guard let limit, limit < maxConnections + descriptorsBesidesClients else { return nil }
        return ConfigurationWarning(variable: "MAX_CONNECTIONS", problem: """
            exceeds what the open-file limit (\(limit), the hard limit of ulimit -n) leaves for clients \
            (\(max(0, limit - descriptorsBesidesClients))): beyond it new clients are dropped unanswered
            """)
    }

    /// Logs each of `warnings`, and the open-file limit's (``openFileWarning(limit:)``), as one
    /// `configuration_warning` line at `warn` level.
    func logWarnings(openFileLimit: Int?) {
        for warning in warnings + [openFileWarning(limit: openFileLimit)].compactMap({ $0 }) {
            Log.warning("configuration_warning", ["variable": warning.variable, "problem": warning.problem])
        }
    }

    /// Checks what `serve` needs beyond what every subcommand needs.
    func validateForServing() throws(ConfigurationError) {
        guard databaseURL != nil else {
            throw ConfigurationError(variable: "DATABASE_URL", problem: "is required (a libpq conninfo or URI)")
        }
    }
}

/// A valid setting that leaves part of the service unusable (`Configuration.warnings`).
struct ConfigurationWarning: Equatable, Sendable {
    var variable: String
    var problem: String
}

extension SignedDataVerifier {
    /// The verifier of signed payloads this configuration describes.
    init(_ configuration: Configuration) {
        self.init(roots: configuration.appleRootCertificates, bundleID: configuration.appleBundleID,
                  appAppleID: configuration.appleAppAppleID, environments: configuration.appleSignedEnvironments)
    }
}

extension AppStoreSettings {
    /// The verifyReceipt settings of this configuration.
    init(_ configuration: Configuration) {
        self.init(productionURL: configuration.appleProductionURL, sandboxURL: configuration.appleSandboxURL,
                  sharedSecret: configuration.appleSharedSecret, bundleID: configuration.appleBundleID)
    }
}
