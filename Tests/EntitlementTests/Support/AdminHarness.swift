import EntitlementModel
import Foundation
import Testing
@testable import AppStore
@testable import EntitlementService
@testable import FakeAppStore
@testable import ServiceRuntime

/// The whole service in-process for the admin tests: the real `Application` on port 0 against a database
/// of its own (created on the `TEST_DATABASE_URL` server, migrated by the application, dropped afterwards),
/// with the in-process fake App Store as its Apple, and a client that talks to it over loopback.
///
/// Keys are fresh random strings per harness, so a test can look for them anywhere: every answer the
/// harness reads is checked never to contain one. With `process: true` the service runs instead as the
/// built `entitlement-service serve` in a child process (`ServiceProcess`) whose standard error is kept
/// (`log`), so a test can read every line it logged without redirecting this process's own standard error.
@Loop
final class AdminHarness: ServiceDatabase {
    nonisolated let appKey = "app-" + randomToken()
    nonisolated let adminKey = "adm-" + randomToken()
    nonisolated static let bundleID = "com.example.app"

    /// The catalog the service starts with (`PRODUCTS_FILE`).
    static let catalog = """
        {"products": [
          {"product_id": "com.example.premium.monthly", "type": "auto_renewable", "entitlements": ["premium"], "subscription_group": "group.premium", "price": "4.99", "price_currency": "USD"},
          {"product_id": "com.example.coins.100", "type": "consumable", "currency": "coins", "amount": 100, "price": "0.99", "price_currency": "USD"},
          {"product_id": "com.example.lifetime", "type": "non_consumable", "entitlements": ["pro"], "price": "19.99", "price_currency": "EUR"}
        ]}
        """

    private(set) var application: Application?
    private var setup: TestService?
    private var child: ServiceProcess?
    /// What the child process logged (`process: true`), complete once `run` has returned.
    private(set) var log = ""
    private(set) var fake: FakeAppStore?
    nonisolated(unsafe) private(set) var port = 0
    private(set) var databaseURL = ""
    let sharedSecret = "secret-" + randomToken()

    private let inProcess: Bool

    private init(inProcess: Bool) {
        self.inProcess = inProcess
    }

    /// Runs `body` against a freshly started service (in this process, or with `process` in a child
    /// process), stopping it and dropping its database however `body` ends.
    static func run<T>(process: Bool = false, _ body: (AdminHarness) async throws -> T) async throws -> T {
        let harness = AdminHarness(inProcess: !process)
        return try await withHarness(start: { harness }, stop: { await $0.stop() }) { harness in
            try await harness.start()
            return try await body(harness)
        }
    }

    private func start() async throws {
        let setup = try await TestService.prepare(
            "admin", catalog: Self.catalog, bundleID: Self.bundleID, fake: FakeAppStoreConfiguration(sharedSecret: sharedSecret),
            environment: [
                "DATABASE_POOL_SIZE": "4", "API_KEYS": appKey, "ADMIN_API_KEYS": adminKey, "APPLE_TIMEOUT_MS": "3000",
                "RETRY_BASE_MS": "60000", "RETRY_MAX_MS": "600000",
            ])
        self.setup = setup
        fake = setup.fake
        databaseURL = setup.databaseURL
        if inProcess {
            let (application, port) = try await setup.startApplication()
            self.application = application
            self.port = port
        } else {
            let environment = setup.environment.merging(["LOG_LEVEL": "debug"]) { _, new in new }
            let child = try await offLoop { try ServiceProcess(environment: environment) }
            self.child = child
            port = child.port
        }
    }

    private func stop() async {
        await application?.shutdown()
        if let child {
            child.signal(SIGTERM)
            let exited = (try? await offLoop { child.waitForExit(timeout: 30) }) ?? nil
            if exited == nil { child.signal(SIGKILL) }
            log = child.log
        }
        await setup?.tearDown()
    }

    /// Which `Authorization` header a request carries.
    enum Key: Sendable {
        case none, app, admin
        /// Sent exactly as given, e.g. `Bearer wrong` or `Basic …`.
        case header(String)
    }

    /// One answer as read off the wire.
    struct Reply: Sendable, CustomStringConvertible {
        var status: Int
        var contentType: String?
        var text: String
        var headers = HTTPHeaders()

        /// The body as a JSON object (empty when it is not one).
        var object: [String: Any] {
            (try? JSONSerialization.jsonObject(with: Data(text.utf8))) as? [String: Any] ?? [:]
        }

        /// The `field` a problem names.
        var field: String? { object["field"] as? String }

        var description: String { "\(status) \(text)" }
    }

    /// One request on a fresh loopback connection. `target` is sent as given (already percent-encoded).
    /// Records an issue when the answer holds either configured key.
    nonisolated func call(_ method: String, _ target: String, key: Key = .admin, body: String? = nil,
                          sourceLocation: SourceLocation = #_sourceLocation) async throws -> Reply {
        try await call(method, target, key: key, bytes: body.map { Array($0.utf8) }, sourceLocation: sourceLocation)
    }

    /// As `call`, with a body of raw bytes (which need not be UTF-8).
    nonisolated func call(_ method: String, _ target: String, key: Key = .admin, bytes: [UInt8]?,
                          sourceLocation: SourceLocation = #_sourceLocation) async throws -> Reply {
        var head = "\(method) \(target) HTTP/1.1\r\nHost: test\r\nConnection: close\r\n"
        switch key {
        case .none: break
        case .app: head += "Authorization: Bearer \(appKey)\r\n"
        case .admin: head += "Authorization: Bearer \(adminKey)\r\n"
        case .header(let value): head += "Authorization: \(value)\r\n"
        }
        if let bytes { head += "Content-Type: application/json\r\nContent-Length: \(bytes.count)\r\n" }
        return try await send(raw: Array((head + "\r\n").utf8) + (bytes ?? []), method: method, sourceLocation: sourceLocation)
    }

    /// Sends `request` exactly as given (it should ask to close the connection) and reads the answer.
    /// Records an issue when the answer holds either configured key or the shared secret.
    nonisolated func send(raw request: [UInt8], method: String = "GET",
                          sourceLocation: SourceLocation = #_sourceLocation) async throws -> Reply {
        let response = try await RawHTTPClient.exchange(port: port, request, timeout: 30, bodyless: method == "HEAD")
        let reply = Reply(status: response.status, contentType: response.headers["Content-Type"], text: response.text, headers: response.headers)
        for secret in [appKey, adminKey, sharedSecret] where reply.text.contains(secret) {
            Issue.record("\(String(decoding: request.prefix(80), as: UTF8.self)) answered a secret: \(reply.text)", sourceLocation: sourceLocation)
        }
        return reply
    }

    /// `value` as JSON text.
    nonisolated static func json(_ value: [String: Any]) -> String {
        String(decoding: try! JSONSerialization.data(withJSONObject: value, options: [.sortedKeys]), as: UTF8.self)
    }

    /// Posts `receipt` for `userID` with the app key; the answer of `POST /v1/receipts`.
    nonisolated func post(_ receipt: FakeReceipt, for userID: String) async throws -> Reply {
        try await call("POST", "/v1/receipts?wait_ms=10000", key: .app,
                       body: Self.json(["user_id": userID, "receipt_data": receipt.receiptData]))
    }

    /// The user's entitlement `name` from `GET /v1/users/{user_id}/entitlements` (at `at` when given).
    nonisolated func entitlement(_ name: String, of userID: String, at: Date? = nil) async throws -> [String: Any]? {
        let query = at.map { "?at=" + RFC3339.string(from: $0) } ?? ""
        let reply = try await call("GET", "/v1/users/\(Self.encodePath(userID))/entitlements\(query)", key: .app)
        guard reply.status == 200 else { throw TestSetupError("entitlements answered \(reply)") }
        return (reply.object["entitlements"] as? [String: Any])?[name] as? [String: Any]
    }

    /// Percent-encodes everything but unreserved characters, for a path segment.
    nonisolated static func encodePath(_ segment: String) -> String {
        segment.addingPercentEncoding(withAllowedCharacters: CharacterSet(charactersIn:
            "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")) ?? segment
    }

}
