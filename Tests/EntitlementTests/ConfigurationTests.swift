import Foundation
import Testing
import X509
@testable import AppStore
@testable import EntitlementService
@testable import FakeAppStore
@testable import ServiceRuntime

@Suite struct ConfigurationTests {
    /// The defaults of README.md's configuration table.
    @Test func defaultsFollowTheContract() throws {
        let config = try Configuration(environment: [:])
        #expect(config.listenAddress == "127.0.0.1")
        #expect(config.port == 8080)
        #expect(config.databaseURL == nil)
        #expect(config.databasePoolSize == 8 && config.databaseReadPoolSize == 2)
        #expect(config.appleSharedSecret == nil && config.appleBundleID == nil)
        #expect(config.appleProductionURL == "https://buy.itunes.apple.com/verifyReceipt")
        #expect(config.appleSandboxURL == "https://sandbox.itunes.apple.com/verifyReceipt")
        #expect(config.appleTimeoutMs == 10_000)
        #expect(config.appleConnectTimeoutMs == 3_000)
        #expect(config.appleCABundle == "/etc/ssl/certs/ca-certificates.crt")
        #expect(config.apiKeys.isEmpty && config.adminAPIKeys.isEmpty)
        #expect(config.productsFile == nil)
        #expect(config.restorePolicy == .transfer)
        #expect(config.retryBaseMs == 5_000)
        #expect(config.retryMaxMs == 600_000)
        #expect(config.maxConnections == 4_096)
        #expect(config.appleRootCertificates == [AppleRootCertificate.g3])
        #expect(config.appleAppAppleID == nil)
        #expect(config.appleSignedEnvironments == [.production, .sandbox])
        // Unset, the service takes its `migrations` folder.
        #expect(config.migrationsDirectory == nil)
        #expect(Migrator.defaultDirectory().lastPathComponent == "migrations")
    }

    /// The connect timeout defaults to min(3000, APPLE_TIMEOUT_MS): never longer than the whole call.
    @Test(arguments: [("2500", 2_500), ("3000", 3_000), ("60000", 3_000)])
    func connectTimeoutDefaultsToTheSmallerOf3000AndTheTotal(total: String, connect: Int) throws {
        let config = try Configuration(environment: ["APPLE_TIMEOUT_MS": total])
        #expect(config.appleTimeoutMs == Int(total))
        #expect(config.appleConnectTimeoutMs == connect)
    }

    @Test func rootCertificatesComeFromDERAndPEMFiles() throws {
        let der = Fixtures.directory.appendingPathComponent("cert_applelib_test_root_ca.der").path
        let testRoot = try Certificate(derEncoded: Array(Fixtures.data("cert_applelib_test_root_ca.der")))
        let pem = FileManager.default.temporaryDirectory.appendingPathComponent("roots-\(UUID().uuidString).pem")
        defer { try? FileManager.default.removeItem(at: pem) }
        let pemText = try [AppleRootCertificate.g3, testRoot].map { try $0.serializeAsPEM().pemString }.joined(separator: "\n")
        try Data(pemText.utf8).write(to: pem)
        let config = try Configuration(environment: ["APPLE_ROOT_CERTIFICATES": "\(der), \(pem.path)"])
        #expect(config.appleRootCertificates == [testRoot, AppleRootCertificate.g3, testRoot])
    }

    @Test func readsEveryVariable() throws {
        let bundle = FileManager.default.temporaryDirectory.appendingPathComponent("ca-\(UUID().uuidString).pem")
        try Data("-----BEGIN CERTIFICATE-----\n".utf8).write(to: bundle)
        defer { try? FileManager.default.removeItem(at: bundle) }
        let config = try Configuration(environment: [
            "LISTEN_ADDR": "0.0.0.0", "PORT": "9090", "DATABASE_URL": "postgresql://x@y/z", "DATABASE_POOL_SIZE": "3",
            "DATABASE_READ_POOL_SIZE": "5",
            "APPLE_SHARED_SECRET": "s3cret", "APPLE_BUNDLE_ID": "com.example.app",
            "APPLE_VERIFY_URL_PRODUCTION": "http://127.0.0.1:1/verifyReceipt",
            "APPLE_VERIFY_URL_SANDBOX": "http://127.0.0.1:2/verifyReceipt", "APPLE_TIMEOUT_MS": "2500",
            "APPLE_CONNECT_TIMEOUT_MS": "700", "APPLE_CA_BUNDLE": bundle.path,
            "API_KEYS": "app-key-1, app-key-2", "ADMIN_API_KEYS": "admin-key", "PRODUCTS_FILE": "/tmp/p.json",
            "RESTORE_POLICY": "keep", "RETRY_BASE_MS": "100", "RETRY_MAX_MS": "1000",
            "MAX_CONNECTIONS": "17", "MIGRATIONS_DIR": "/tmp/migrations", "APPLE_APP_APPLE_ID": "1234567890",
            "APPLE_SIGNED_ENVIRONMENTS": "Sandbox, Xcode",
        ])
        #expect(config.listenAddress == "0.0.0.0" && config.port == 9090)
        #expect(config.databaseURL == "postgresql://x@y/z" && config.databasePoolSize == 3 && config.databaseReadPoolSize == 5)
        #expect(config.appleSharedSecret == "s3cret" && config.appleBundleID == "com.example.app")
        #expect(config.appleProductionURL == "http://127.0.0.1:1/verifyReceipt")
        #expect(config.appleSandboxURL == "http://127.0.0.1:2/verifyReceipt" && config.appleTimeoutMs == 2500)
        #expect(config.appleConnectTimeoutMs == 700 && config.appleCABundle == bundle.path)
        #expect(config.apiKeys == ["app-key-1", "app-key-2"] && config.adminAPIKeys == ["admin-key"])
        #expect(config.productsFile == "/tmp/p.json")
        #expect(config.restorePolicy == .keep && config.retryBaseMs == 100 && config.retryMaxMs == 1000)
        #expect(config.maxConnections == 17 && config.migrationsDirectory == "/tmp/migrations")
        #expect(config.appleAppAppleID == 1_234_567_890 && config.appleSignedEnvironments == [.sandbox, .xcode])
        let verifier = SignedDataVerifier(config)
        #expect(verifier.bundleID == "com.example.app" && verifier.appAppleID == 1_234_567_890)
        #expect(verifier.environments == [.sandbox, .xcode] && verifier.roots == [AppleRootCertificate.g3])
    }

    @Test(arguments: [
        ("PORT", "eighty", "PORT"), ("PORT", "70000", "PORT"), ("DATABASE_POOL_SIZE", "0", "DATABASE_POOL_SIZE"),
        ("LISTEN_ADDR", "not-an-addr", "LISTEN_ADDR"), ("LISTEN_ADDR", "localhost", "LISTEN_ADDR"),
        ("DATABASE_READ_POOL_SIZE", "0", "DATABASE_READ_POOL_SIZE"),
        ("RESTORE_POLICY", "share", "RESTORE_POLICY"), ("APPLE_TIMEOUT_MS", "-1", "APPLE_TIMEOUT_MS"),
        ("APPLE_VERIFY_URL_SANDBOX", "ftp://x", "APPLE_VERIFY_URL_SANDBOX"), ("RETRY_MAX_MS", "10", "RETRY_MAX_MS"),
        ("APPLE_ROOT_CERTIFICATES", "/nonexistent/root.der", "APPLE_ROOT_CERTIFICATES"),
        ("APPLE_ROOT_CERTIFICATES", Fixtures.directory.appendingPathComponent("SOURCES.md").path, "APPLE_ROOT_CERTIFICATES"),
        ("APPLE_ROOT_CERTIFICATES", ",", "APPLE_ROOT_CERTIFICATES"),
        ("APPLE_CONNECT_TIMEOUT_MS", "0", "APPLE_CONNECT_TIMEOUT_MS"), ("MAX_CONNECTIONS", "0", "MAX_CONNECTIONS"),
        ("APPLE_CA_BUNDLE", "/nonexistent/ca.pem", "APPLE_CA_BUNDLE"), ("APPLE_CA_BUNDLE", Fixtures.directory.path, "APPLE_CA_BUNDLE"),
        ("APPLE_APP_APPLE_ID", "com.example.app", "APPLE_APP_APPLE_ID"), ("APPLE_APP_APPLE_ID", "-5", "APPLE_APP_APPLE_ID"),
        ("APPLE_APP_APPLE_ID", "12e3", "APPLE_APP_APPLE_ID"), ("APPLE_SIGNED_ENVIRONMENTS", "Production,", "APPLE_SIGNED_ENVIRONMENTS"),
        ("APPLE_SIGNED_ENVIRONMENTS", "production,sandbox", "APPLE_SIGNED_ENVIRONMENTS"), ("APPLE_SIGNED_ENVIRONMENTS", "Staging", "APPLE_SIGNED_ENVIRONMENTS"),
    ])
    func badValuesNameTheVariable(variable: String, value: String, named: String) {
        #expect(throws: ConfigurationError.self) { try Configuration(environment: [variable: value]) }
        do {
            _ = try Configuration(environment: [variable: value])
        } catch {
            #expect(error.variable == named)
            #expect(error.description.hasPrefix("configuration error: \(named) "))
            #expect(!error.description.contains("\n"))
        }
    }

    /// A URL may carry credentials (`user:password@`): a refused one is named, not repeated.
    @Test(arguments: ["WEBHOOK_URL", "APPLE_VERIFY_URL_PRODUCTION", "APPLE_API_URL_SANDBOX"])
    func urlErrorsNeverEchoTheURL(variable: String) {
        do {
            _ = try Configuration(environment: [variable: "ftp://user:UrlPassSecret@127.0.0.1/hook"])
            Issue.record("an ftp URL was accepted")
        } catch {
            #expect(error.variable == variable)
            #expect(!error.description.contains("UrlPassSecret"))
        }
        // A URL without a host (`http://`) would fail every call it makes: refused at start too.
        for hostless in ["http://", "https://", "http:///path"] {
            #expect("\(hostless)") { _ = try Configuration(environment: [variable: hostless]) } throws: { error in
                (error as? ConfigurationError)?.variable == variable
            }
        }
    }

    @Test func keyErrorsNeverEchoTheKey() {
        do {
            _ = try Configuration(environment: ["ADMIN_API_KEYS": "good-key,bad key with spaces"])
            Issue.record("a key with spaces was accepted")
        } catch {
            #expect(error.variable == "ADMIN_API_KEYS")
            #expect(!error.description.contains("bad key"))
        }
    }

    /// Empty key lists and no shared secret are valid but leave routes unusable: one warning each, naming the
    /// variable only.
    @Test func warnsOfMissingKeysAndSecretWithoutValues() throws {
        let bare = try Configuration(environment: [:])
        #expect(bare.warnings.map(\.variable) == ["API_KEYS", "ADMIN_API_KEYS", "APPLE_SHARED_SECRET"])
        #expect(bare.warnings[0].problem == "is empty: every /v1 app route answers 401")
        let appOnly = try Configuration(environment: ["API_KEYS": "app-secret-key", "APPLE_SHARED_SECRET": "shh-secret"])
        #expect(appOnly.warnings == [ConfigurationWarning(variable: "ADMIN_API_KEYS", problem: "is empty: every /v1/admin route answers 401")])
        let complete = try Configuration(environment: ["API_KEYS": "a", "ADMIN_API_KEYS": "b", "APPLE_SHARED_SECRET": "c"])
        #expect(complete.warnings.isEmpty)
    }

    /// `MAX_CONNECTIONS` beyond what the open-file limit leaves for clients is a warning naming both numbers.
    @Test func warnsWhenTheOpenFileLimitCannotHoldMaxConnections() throws {
        let configuration = try Configuration(environment: ["MAX_CONNECTIONS": "4096"])
        #expect(configuration.openFileWarning(limit: 1_048_576) == nil)
        #expect(configuration.openFileWarning(limit: nil) == nil)
        #expect(configuration.openFileWarning(limit: 4_096 + configuration.descriptorsBesidesClients) == nil)
        let warning = try #require(configuration.openFileWarning(limit: 1_024))
        #expect(warning.variable == "MAX_CONNECTIONS")
        #expect(warning.problem.contains("(1024,") && warning.problem.contains("(\(1_024 - configuration.descriptorsBesidesClients))"))
    }

    /// Raising the soft limit to the hard one leaves it there, for the worker copies to inherit.
    @Test func theOpenFileLimitIsRaisedToTheHardLimit() throws {
        let limit = try #require(OpenFileLimit.raiseToHardLimit())
        let now = try #require(OpenFileLimit.current())
        #expect(now.soft == limit && now.soft == now.hard)
    }

    @Test func servingNeedsADatabase() throws {
        #expect(throws: ConfigurationError.self) { try Configuration(environment: [:]).validateForServing() }
        try Configuration(environment: ["DATABASE_URL": "dbname=x"]).validateForServing()
    }

    /// A DATABASE_URL libpq cannot read stops start-up naming the variable, never its text (libpq's own message
    /// quotes the fragment around the fault, which may be the password).
    @Test func aMalformedDatabaseURLIsNamedNotShown() {
        for url in ["host=127.0.0.1 port=1 password=Sup3r Secret99", "postgresql://u:pw%zzSECRET@127.0.0.1:1/db"] {
            #expect { _ = try Configuration(environment: ["DATABASE_URL": url]) } throws: { error in
                let text = "\(error)"
                return (error as? ConfigurationError)?.variable == "DATABASE_URL" && !text.contains("Secret") && !text.contains("SECRET")
            }
        }
    }
}
