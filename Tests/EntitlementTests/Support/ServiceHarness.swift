import EntitlementModel
import Foundation
@testable import AppStore
@testable import EntitlementService
@testable import FakeAppStore
@testable import ServiceRuntime

/// The whole service in-process for end-to-end tests: the real `Application` on port 0 against a fresh
/// PostgreSQL database of its own, the fake App Store (also in-process, on port 0) as its Apple, and a small
/// JSON client that talks to it over loopback from off the loop.
@Loop
final class ServiceHarness: ServiceDatabase {
    nonisolated static let appKey = "app-key-0123456789"
    nonisolated static let adminKey = "admin-key-0123456789"
    nonisolated static let bundleID = "com.example.app"
    nonisolated static let sharedSecret = "shared-secret-for-tests"

    static let catalog = """
        {"products": [
          {"product_id": "com.example.premium.monthly", "type": "auto_renewable", "entitlements": ["premium"], "subscription_group": "group.premium", "price": "4.99", "price_currency": "USD"},
          {"product_id": "com.example.premium.yearly", "type": "auto_renewable", "entitlements": ["premium"], "subscription_group": "group.premium", "price": "39.99", "price_currency": "USD"},
          {"product_id": "com.example.coins.100", "type": "consumable", "currency": "coins", "amount": 100, "price": "0.99", "price_currency": "USD"},
          {"product_id": "com.example.lifetime", "type": "non_consumable", "entitlements": ["pro"], "price": "19.99", "price_currency": "USD"},
          {"product_id": "com.example.pass.month", "type": "non_renewing", "entitlements": ["pass"], "duration": "P1M", "price": "2.99", "price_currency": "USD"}
        ]}
        """

    let application: Application
    let port: Int
    private let setup: TestService
    var fake: FakeAppStore { setup.fake }
    /// The harness's fake App Store and database, as set up.
    nonisolated var testService: TestService { setup }
    var databaseURL: String { setup.databaseURL }
    /// The environment the service was started with.
    var setupEnvironment: [String: String] { setup.environment }

    /// Runs `body` against a freshly started service (`environment` overrides the defaults, e.g.
    /// `RESTORE_POLICY`), stopping it and dropping its database however `body` ends.
    /// With `serverAPI` the service uses the fake's App Store Server API.
    static func run<T>(_ environment: [String: String] = [:], serverAPI: Bool = false, _ body: (ServiceHarness) async throws -> T) async throws -> T {
        try await withHarness(start: { try await start(environment, serverAPI: serverAPI) }, stop: { await $0.stop() }, body)
    }

    /// Starts everything; `environment` overrides the defaults (e.g. `RESTORE_POLICY`).
    private static func start(_ environment: [String: String] = [:], serverAPI: Bool = false) async throws -> ServiceHarness {
        let setup = try await TestService.prepare(
            "e2e", catalog: catalog, bundleID: bundleID, fake: FakeAppStoreConfiguration(sharedSecret: sharedSecret),
            serverAPI: serverAPI,
            environment: [
                "DATABASE_POOL_SIZE": "6", "API_KEYS": appKey, "ADMIN_API_KEYS": adminKey, "APPLE_TIMEOUT_MS": "3000",
                "RETRY_BASE_MS": "100", "RETRY_MAX_MS": "400",
            ].merging(environment) { _, new in new })
        let application: Application, port: Int
        do {
            (application, port) = try await setup.startApplication()
        } catch {
            await setup.tearDown()
            throw error
        }
        return ServiceHarness(application: application, port: port, setup: setup)
    }

    private init(application: Application, port: Int, setup: TestService) {
        self.application = application
        self.port = port
        self.setup = setup
    }

    /// Shuts the service and the fake down and drops the database.
    private func stop() async {
        await application.shutdown()
        await setup.tearDown()
    }

    /// One request over a fresh loopback connection; the body is JSON text.
    nonisolated func request(_ method: String, _ target: String, json: String? = nil, key: String? = ServiceHarness.appKey) async throws -> RawHTTPClient.Response {
        let port = self.port
        var headers: [(String, String)] = [("Content-Type", "application/json")]
        if let key { headers.append(("Authorization", "Bearer \(key)")) }
        let text = RawHTTPClient.request(method, target, headers: headers, body: json ?? (method == "GET" ? nil : ""))
        return try await RawHTTPClient.exchange(port: port, text, timeout: 40)
    }

    /// Posts `receipt` for `userID` and returns the answer.
    nonisolated func post(_ receipt: FakeReceipt, for userID: String, waitMs: Int = 10_000, orderID: String? = nil) async throws -> RawHTTPClient.Response {
        try await post(receiptData: receipt.receiptData, for: userID, waitMs: waitMs, orderID: orderID)
    }

    /// Posts `receiptData` exactly as given (a copy of a receipt with its own fake answers, say) for `userID`.
    nonisolated func post(receiptData: String, for userID: String, waitMs: Int = 10_000, orderID: String? = nil) async throws -> RawHTTPClient.Response {
        var body: [String: String] = ["user_id": userID, "receipt_data": receiptData]
        body["order_id"] = orderID
        let json = String(decoding: try JSONEncoder().encode(body), as: UTF8.self)
        return try await request("POST", "/v1/receipts?wait_ms=\(waitMs)", json: json)
    }

    /// The user's entitlements document, optionally at `at`.
    nonisolated func entitlements(_ userID: String, at: String? = nil) async throws -> [String: Any] {
        let query = at.map { "?at=\($0)" } ?? ""
        let response = try await request("GET", "/v1/users/\(userID)/entitlements\(query)")
        guard response.status == 200 else { throw RawHTTPClient.Failure.malformed("entitlements answered \(response.status): \(response.text)") }
        return try response.json()
    }
}

extension Dictionary where Key == String, Value == Any {
    /// `document["entitlements"][name]` as a dictionary.
    func entitlement(_ name: String) -> [String: Any]? {
        (self["entitlements"] as? [String: Any])?[name] as? [String: Any]
    }
}

extension ServiceHarness {
    /// Programs the fake App Store's answers for one receipt (steps as in `POST /control/scenarios`).
    func program(_ receiptData: String, production: [JSONValue] = [], sandbox: [JSONValue] = []) throws {
        let parse = { (steps: [JSONValue]) throws -> [FakeStep] in
            try steps.map { step throws(FakeScenarioError) in
                try FakeStep.parse(step) { name throws(FakeScenarioError) in throw FakeScenarioError("no fixtures here: \(name)") }
            }
        }
        fake.state.setScenario(FakeScenario(production: try parse(production), sandbox: try parse(sandbox)), for: receiptData)
    }

    /// Takes the fake App Store down (HTTP 503 for everything) or brings it back.
    func appleOutage(_ down: Bool) {
        fake.state.configure(sharedSecret: nil, latencyMs: nil, outage: down)
    }

    /// Polls `GET /v1/receipts/{id}` until its status leaves `pending`, for at most `seconds`.
    nonisolated func awaitResolution(_ id: String, seconds: Double = 20) async throws -> [String: Any] {
        let deadline = RawHTTPClient.now() + seconds
        while true {
            let state = try await request("GET", "/v1/receipts/\(id)").json()
            if state["status"] as? String != "pending" || RawHTTPClient.now() > deadline { return state }
            await Task.yield()
            try await Task.sleep(for: .milliseconds(50))
        }
    }
}
