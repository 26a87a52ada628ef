import Foundation
@testable import AppStore
@testable import EntitlementService
@testable import FakeAppStore
@testable import ServiceRuntime

/// What every end-to-end test of the service needs around it: the fake App Store in this process, a fresh
/// database on the `TEST_DATABASE_URL` server, a catalog file, and the environment a service, in this process
/// or a child, reads to use them. `tearDown()` stops the fake, drops the database and removes the file.
@Loop
final class TestService {
    let fake: FakeAppStore
    let databaseURL: String
    /// The service's environment: database, catalog, Apple's URLs, bundle id and shared secret, port 0, plus
    /// whatever the caller added.
    let environment: [String: String]
    private let databaseName: String
    private let catalogFile: URL

    private init(fake: FakeAppStore, databaseURL: String, environment: [String: String], databaseName: String, catalogFile: URL) {
        self.fake = fake
        self.databaseURL = databaseURL
        self.environment = environment
        self.databaseName = databaseName
        self.catalogFile = catalogFile
    }

    /// Starts the fake (answering as `fake` says, its shared secret also given to the service), creates the
    /// database `<prefix>_<random>` and the catalog file; `environment` overrides the defaults. With
    /// `serverAPI` the service gets the fake's Server API key and trusts the fake's signing root.
    static func prepare(_ prefix: String, catalog: String, bundleID: String, fake configuration: FakeAppStoreConfiguration,
                        serverAPI: Bool = false, environment overrides: [String: String]) async throws -> TestService {
        let fake = FakeAppStore(configuration: configuration)
        let fakePort = try fake.start(port: 0)
        let name = prefix + "_" + randomToken()
        let server = try await PostgresConnection.connect(try TestDatabase.url())
        defer { server.close() }
        _ = try await server.query("CREATE DATABASE \(name)")
        let databaseURL = try TestDatabase.url(database: name)
        let catalogFile = FileManager.default.temporaryDirectory.appendingPathComponent("\(name).json")
        try Data(catalog.utf8).write(to: catalogFile)
        var environment = [
            "DATABASE_URL": databaseURL, "LISTEN_ADDR": "127.0.0.1", "PORT": "0", "PRODUCTS_FILE": catalogFile.path,
            "APPLE_BUNDLE_ID": bundleID, "MIGRATIONS_DIR": Migrator.defaultDirectory().path,
            "APPLE_VERIFY_URL_PRODUCTION": "http://127.0.0.1:\(fakePort)/verifyReceipt",
            "APPLE_VERIFY_URL_SANDBOX": "http://127.0.0.1:\(fakePort)/sandbox/verifyReceipt",
        ]
        environment["APPLE_SHARED_SECRET"] = configuration.sharedSecret
        if serverAPI {
            let keyFile = FileManager.default.temporaryDirectory.appendingPathComponent("\(name).p8")
            let rootFile = FileManager.default.temporaryDirectory.appendingPathComponent("\(name)-root.der")
            try Data((fake.serverAPIKey.pemRepresentation + "\n").utf8).write(to: keyFile)
            try Data(fake.signingChain.rootDER).write(to: rootFile)
            environment.merge([
                "APPLE_ISSUER_ID": configuration.apiIssuerID, "APPLE_KEY_ID": configuration.apiKeyID, "APPLE_PRIVATE_KEY_FILE": keyFile.path,
                "APPLE_ROOT_CERTIFICATES": rootFile.path, "APPLE_API_URL_PRODUCTION": "http://127.0.0.1:\(fakePort)",
                "APPLE_API_URL_SANDBOX": "http://127.0.0.1:\(fakePort)/sandbox",
            ]) { _, new in new }
        }
        environment.merge(overrides) { _, new in new }
        return TestService(fake: fake, databaseURL: databaseURL, environment: environment, databaseName: name, catalogFile: catalogFile)
    }

    /// The real `Application` started in this process with `environment`; it and its port.
    func startApplication() async throws -> (Application, Int) {
        let application = try await Application(
            configuration: try Configuration(environment: environment), migrationsDirectory: Migrator.defaultDirectory())
        return (application, try application.start())
    }

    func tearDown() async {
        await fake.shutdown()
        try? FileManager.default.removeItem(at: catalogFile)
        guard let server = try? await PostgresConnection.connect(try TestDatabase.url()) else { return }
        _ = try? await server.query("DROP DATABASE \(databaseName) WITH (FORCE)")
        server.close()
    }
}

/// A harness around a service with a database of its own, which tests query to check what it stored.
@Loop
protocol ServiceDatabase: AnyObject {
    var databaseURL: String { get }
}

extension ServiceDatabase {
    /// A SQL statement against the service's database, on a connection of its own.
    func sql(_ text: String, _ parameters: [any PostgresEncodable] = []) async throws -> [PostgresRow] {
        let connection = try await PostgresConnection.connect(databaseURL)
        defer { connection.close() }
        return try await connection.query(text, parameters).rows
    }
}

/// Starts a harness with `start`, runs `body` on it and then `stop`, however `body` ends.
@Loop
func withHarness<Harness, T>(start: () async throws -> Harness, stop: (Harness) async -> Void,
                             _ body: (Harness) async throws -> T) async throws -> T {
    let harness = try await start()
    do {
        let result = try await body(harness)
        await stop(harness)
        return result
    } catch {
        await stop(harness)
        throw error
    }
}
