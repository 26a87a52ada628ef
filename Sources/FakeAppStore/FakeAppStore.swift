import Crypto
import EntitlementModel
import Foundation
import ServiceRuntime

/// A fake of the App Store (Apple's legacy verifyReceipt service, and StoreKit 2's signed transactions and
/// server notifications), served by the project's own HTTP server on the loop, for tests, demos, staging and
/// benchmarks.
///
/// `POST /verifyReceipt` (production) and `POST /sandbox/verifyReceipt` answer as Apple does, HTTP 200 with
/// `{"status": N, ...}`: from the scenario programmed for the receipt, else from a `FakeReceipt` carried in
/// the receipt data, else `21002` (see `FakeAppStoreState.verify`). The control API programs and inspects it:
///
/// - `POST /control/scenarios` `{"receipt_data", "production": [step...], "sandbox": [step...]}`: per-endpoint
///   answers for one receipt, taken in order, the last repeating (steps: `FakeStep`).
/// - `PUT /control/config` `{"shared_secret": "..."|null, "latency_ms": N, "outage": bool}`; `GET` reads it.
/// - `GET /control/requests`: what was received (counts per endpoint, the passwords seen, the newest requests).
/// - `POST /control/reset`: back to the start configuration; held requests are released, and the StoreKit
///   purchases, the notifications sent and the Server API's settings, scenarios and log forgotten (the
///   signing chain and the Server API key stay).
///
/// StoreKit 2: the fake sells purchases (`FakeStoreKit`) and signs them, and the server notifications about
/// them, with its `FakeSigningChain` (bundle id and app Apple id from the configuration). Dates in bodies are
/// integer milliseconds since 1970 or RFC 3339 strings; answers carry Apple's payloads as Apple writes them.
///
/// - `GET /control/signing/root.der` (`application/pkix-cert`) and `GET /control/signing/root.pem`: the root
///   certificate to trust (`APPLE_ROOT_CERTIFICATES`). `GET /control/signing`: `{"root", "intermediate",
///   "leaf"` (base64 DER)`, "bundle_id", "app_apple_id"}`.
/// - `POST /control/storekit/purchases` `{"product_id", "type": "consumable"|"non_consumable"|"auto_renewable"|
///   "non_renewing", "app_account_token"?, "environment"?: "Sandbox" (default)|"Production", "quantity"?,
///   "purchase_date"?, "expires_date"?, "period"?: "P1M", "original_transaction_id"?, "transaction_id"?,
///   "price"?: milliunits, "currency"?, "storefront"?, "in_app_ownership_type"?,
///   "subscription_group_identifier"?, "customer"?, "order_id"?, "notify"?}` → 201 with the purchase answer
///   (below). `customer` names the App Store account (default `customer`): the Server API's history and
///   statuses are per customer; `order_id` adds the purchase to an order of that customer and environment
///   (default a new order; each renewal and upgrade is a new order too). An auto-renewable
///   subscription expires one `period` after its purchase unless `expires_date` says otherwise; a
///   non-renewing one carries `expires_date` only when given (Apple sends none). With
///   `original_transaction_id` it is the next period of that subscription (as `renew`).
/// - `GET /control/storekit/purchases/{original_transaction_id}`: `{"original_transaction_id", "type",
///   "transactions": [{"transaction_id", "order_id", "signed_transaction", "payload"}], "signed_renewal_info"?,
///   "renewal_info"?, "status"?}`.
/// - `POST /control/storekit/purchases/{original_transaction_id}/{action}` with an optional body: `renew`
///   `{"product_id"?, "transaction_id"?, "purchase_date"?, "expires_date"?}`; `refund` and `revoke` (Family
///   Sharing) `{"transaction_id"?, "revocation_reason"?: 0|1, "revocation_date"?}`; `reverse_refund`
///   `{"transaction_id"?}`; `expire` `{"expiration_intent"?: 1-5, "expires_date"?}`; `billing_retry`;
///   `grace_period` `{"grace_period_expires_date"?}` (default 16 days on); `auto_renew_off`; `auto_renew_on`;
///   `upgrade` `{"product_id", "transaction_id"?, "expires_date"?}`; `downgrade` `{"product_id"}`. Each may
///   carry `"notify"`. Refunds work on every purchase, the rest on auto-renewable subscriptions (else 409).
///   → 200 with the purchase answer.
/// - The purchase answer: `{"transaction_id", "original_transaction_id", "type", "order_id", "customer",
///   "signed_transaction", "payload", "notification_type", "subtype", "signed_renewal_info"?, "renewal_info"?, "status"?,
///   "notification"?}`: the transaction concerned (new, refunded…) signed now, the renewal info and Apple's
///   status (1 active … 5 revoked) of a subscription, the notification Apple would send, and with
///   `notify` `{"url", ...}` (the members of `POST /control/storekit/notifications`, type and transaction
///   defaulting to the change's) the report of that notification as sent.
/// - `GET /control/storekit/receipt?environment=Sandbox&app_account_token=...`: `{"receipt_data"}`, a fake
///   receipt (`FakeReceipt`) with the same purchases, for `POST /verifyReceipt`.
/// - `POST /control/storekit/notifications` `{"url", "notification_type", "subtype"?, "transaction_id"?,
///   "environment"?, "notification_uuid"?, "signed_date"?, "copies"?: 1-100, "parallel"?: bool,
///   "tamper"?: bool, "delay_ms"?}`: builds the V2 notification, signs it, POSTs `{"signedPayload"}` to
///   `url` `copies` times (the same payload, one after the other or all at once with `parallel`), after
///   `delay_ms`; a `signed_date` in the past makes an older notification, to send after a newer one;
///   `tamper` alters the payload after signing. → `{"notification_uuid", "notification_type", "subtype",
///   "transaction_id", "tampered", "signed_payload", "payload", "deliveries": [{"status": N}|{"status":
///   null, "error"}]}`.
/// - `POST /control/storekit/notifications/batch` `{"url", "notifications": [{...as above, without url and
///   parallel}], "shuffle"?: true, "seed"?, "concurrency"?: 4}`: every copy of every notification, in a
///   random order (replayable with `seed`), `concurrency` at a time. → `{"sent", "delivered" (2xx),
///   "order": [index of the notification of each delivery, in sending order], "notifications":
///   [{"notification_uuid", "notification_type", "transaction_id", "statuses": [N|null]}]}`.
///
/// The App Store Server API (Apple's endpoints at Apple's paths, answered from the same purchases and the
/// notifications sent) and its control API (`/control/server-api/...`) are documented on the extension in
/// FakeAppStore+ServerAPI.swift.
///
/// Latency and delays wait on loop timers, never blocking the loop; notifications go out through the
/// runtime's `HTTPClient` (libcurl on the loop). A stalled request is held until a reset or the shutdown
/// releases it with a 503 (its client has normally given up long before).
@Loop
public final class FakeAppStore {
    /// The start configuration, which `POST /control/reset` returns to; `PUT /control/config` changes the live
    /// settings, not this.
    public let configuration: FakeAppStoreConfiguration
    /// What signs the StoreKit 2 payloads and notifications.
    public let signingChain: FakeSigningChain
    var state: FakeAppStoreState
    var storeKit: FakeStoreKit
    /// The notifications sent, for the Server API's notification history.
    var notificationLog = FakeNotificationLog()
    /// The key whose tokens the Server API accepts (its `.p8` is served at `GET /control/server-api`).
    public let serverAPIKey: P256.Signing.PrivateKey
    var serverAPI = FakeServerAPIState()
    /// Sends the server notifications.
    private(set) lazy var notifier = HTTPClient(configuration: HTTPClientConfiguration(connectTimeoutMs: 2_000, totalTimeoutMs: 10_000))
    private var server: HTTPServer?
    private var holds: [Int: (timer: LoopTimer?, continuation: CheckedContinuation<Bool, Never>)] = [:]
    private var nextHold = 0
    private var shuttingDown = false

    /// A fake signing with `signingChain` and accepting Server API tokens of `serverAPIKey` (fresh ones
    /// unless given).
    public init(configuration: FakeAppStoreConfiguration, signingChain: FakeSigningChain = .make(),
                serverAPIKey: P256.Signing.PrivateKey = P256.Signing.PrivateKey()) {
        self.configuration = configuration
        self.signingChain = signingChain
        self.serverAPIKey = serverAPIKey
        state = FakeAppStoreState(configuration: configuration)
        storeKit = FakeStoreKit(settings: .init(bundleID: configuration.bundleID, appAppleID: configuration.appAppleID))
    }

    /// Binds `host:port` (0 picks a free port) and serves; returns the bound port. The routes hold the fake
    /// unowned: keep it alive until `shutdown()` returns.
    public func start(host: String = "127.0.0.1", port: Int) throws -> Int {
        precondition(server == nil, "FakeAppStore.start called twice")
        let router = Router()
        addRoutes(to: router)
        let server = HTTPServer(
            configuration: HTTPServerConfiguration(
                host: host, port: port, maxConnections: 8_192, maxBodyBytes: 8 << 20, backlog: 4_096),
            router: router, metrics: Metrics())
        let bound = try server.start()
        self.server = server
        let base = "http://\(host.contains(":") ? "[\(host)]" : host):\(bound)"
        Log.info("fake_app_store_listening", [
            "port": bound, "production_url": base + "/verifyReceipt", "sandbox_url": base + "/sandbox/verifyReceipt",
            "latency_ms": configuration.latencyMs, "shared_secret_set": configuration.sharedSecret != nil,
        ])
        return bound
    }

    /// Releases held requests, then stops the server once every connection is closed.
    public func shutdown() async {
        shuttingDown = true
        releaseHolds()
        await server?.shutdown()
    }

    private func addRoutes(to router: Router) {
        router.post("/verifyReceipt") { [unowned self] request, _ in try await verifyReceipt(request, environment: .production) }
        router.post("/sandbox/verifyReceipt") { [unowned self] request, _ in try await verifyReceipt(request, environment: .sandbox) }
        router.post("/control/scenarios") { [unowned self] request, _ in try addScenario(request) }
        router.put("/control/config") { [unowned self] request, _ in try configure(request) }
        router.get("/control/config") { [unowned self] _, _ in configurationResponse() }
        router.get("/control/requests") { [unowned self] _, _ in requestsResponse() }
        router.post("/control/reset") { [unowned self] _, _ in
            state.reset()
            storeKit.reset()
            notificationLog.reset()
            serverAPI.reset()
            releaseHolds()
            return .json(["reset": true] as JSONValue)
        }
        addStoreKitRoutes(to: router)
        addServerAPIRoutes(to: router)
    }

    // MARK: - verifyReceipt

    /// Apple's answer, or (a `drop` step) the connection closed without one.
    private func verifyReceipt(_ request: HTTPRequest, environment: StoreEnvironment) async throws(HTTPConnectionAbort) -> HTTPResponse {
        let reply = state.verify(environment: environment, body: request.body, now: Date())
        if reply.delayMs > 0, await !hold(milliseconds: reply.delayMs) {
            return Self.releasedResponse
        }
        switch reply.action {
        case .stall:
            _ = await hold(milliseconds: nil)
            return Self.releasedResponse
        case .drop:
            throw HTTPConnectionAbort()
        case .respond(let status, let body):
            let json = body.first == UInt8(ascii: "{") || body.first == UInt8(ascii: "[")
            return HTTPResponse(
                status: status, headers: ["Content-Type": json ? "application/json" : "text/plain; charset=utf-8"], body: body)
        }
    }

    /// The answer of a request whose wait was cut short by a reset or the shutdown.
    static let releasedResponse = HTTPResponse.text("The fake App Store released this request.\n", status: 503)

    /// Waits `milliseconds` on a loop timer (forever when nil); returns false when a reset or the shutdown
    /// ended the wait first.
    func hold(milliseconds: Int?) async -> Bool {
        guard !shuttingDown else { return false }
        let id = nextHold
        nextHold += 1
        return await withCheckedContinuation { continuation in
            var timer: LoopTimer?
            if let milliseconds {
                let waiting = LoopTimer()
                waiting.start(after: UInt64(milliseconds)) { [weak self] in self?.endHold(id, completed: true) }
                timer = waiting
            }
            holds[id] = (timer, continuation)
        }
    }

    private func endHold(_ id: Int, completed: Bool) {
        guard let hold = holds.removeValue(forKey: id) else { return }
        hold.timer?.close()
        hold.continuation.resume(returning: completed)
    }

    private func releaseHolds() {
        for id in Array(holds.keys) { endHold(id, completed: false) }
    }

    // MARK: - Control API

    private func addScenario(_ request: HTTPRequest) throws -> HTTPResponse {
        let body = try Self.object(request)
        if let unknown = body.keys.sorted().first(where: { !["receipt_data", "production", "sandbox"].contains($0) }) {
            throw ProblemError.badRequest("Unknown key '\(unknown)' (expected receipt_data, production, sandbox).", field: unknown)
        }
        guard case .string(let receiptData)? = body["receipt_data"], !receiptData.isEmpty else {
            throw ProblemError.badRequest("The field 'receipt_data' must be a non-empty string.", field: "receipt_data")
        }
        let production = try steps(body["production"], field: "production")
        let sandbox = try steps(body["sandbox"], field: "sandbox")
        guard !production.isEmpty || !sandbox.isEmpty else {
            throw ProblemError.badRequest("A scenario needs at least one step in 'production' or 'sandbox'.", field: "production")
        }
        state.setScenario(FakeScenario(production: production, sandbox: sandbox), for: receiptData)
        return .json([
            "receipt_data": .string(receiptData), "production_steps": .int(production.count), "sandbox_steps": .int(sandbox.count),
        ] as JSONValue, status: 201)
    }

    private func steps(_ value: JSONValue?, field: String) throws -> [FakeStep] {
        guard let value else { return [] }
        guard case .array(let list) = value else { throw ProblemError.badRequest("The field '\(field)' must be an array of steps.", field: field) }
        var steps: [FakeStep] = []
        for (index, step) in list.enumerated() {
            do {
                steps.append(try FakeStep.parse(step, fixture: fixture))
            } catch {
                throw ProblemError.badRequest("Step \(field)[\(index)]: \(error.message).", field: "\(field)[\(index)]")
            }
        }
        return steps
    }

    /// The bytes of one sample of the fixtures directory, named by its bare file name.
    private func fixture(_ name: String) throws(FakeScenarioError) -> [UInt8] {
        guard !name.isEmpty, !name.hasPrefix("."), name.utf8.allSatisfy({ Self.fileNameBytes.contains($0) }) else {
            throw FakeScenarioError("'fixture' must be a bare file name, got '\(name)'")
        }
        let path = state.configuration.fixturesDirectory + "/" + name
        guard let data = FileManager.default.contents(atPath: path) else {
            throw FakeScenarioError("no fixture '\(name)' in \(state.configuration.fixturesDirectory)")
        }
        return Array(data)
    }

    private static let fileNameBytes = Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-".utf8)

    private func configure(_ request: HTTPRequest) throws -> HTTPResponse {
        let body = try Self.object(request)
        if let unknown = body.keys.sorted().first(where: { !["shared_secret", "latency_ms", "outage"].contains($0) }) {
            throw ProblemError.badRequest("Unknown key '\(unknown)' (expected shared_secret, latency_ms, outage).", field: unknown)
        }
        var secret: String??
        switch body["shared_secret"] {
        case nil: secret = nil
        case .null?: secret = .some(nil)
        case .string(let text)? where !text.isEmpty: secret = .some(text)
        default: throw ProblemError.badRequest("The field 'shared_secret' must be a non-empty string or null.", field: "shared_secret")
        }
        var latency: Int?
        switch body["latency_ms"] {
        case nil: latency = nil
        case .int(let milliseconds)? where (0...FakeAppStoreConfiguration.maxDelayMs).contains(milliseconds): latency = milliseconds
        default: throw ProblemError.badRequest("The field 'latency_ms' must be an integer in 0...\(FakeAppStoreConfiguration.maxDelayMs).", field: "latency_ms")
        }
        var outage: Bool?
        switch body["outage"] {
        case nil: outage = nil
        case .bool(let flag)?: outage = flag
        default: throw ProblemError.badRequest("The field 'outage' must be a boolean.", field: "outage")
        }
        state.configure(sharedSecret: secret, latencyMs: latency, outage: outage)
        return configurationResponse()
    }

    /// The settings in force; the shared secret only as whether one is set.
    private func configurationResponse() -> HTTPResponse {
        .json([
            "shared_secret_set": .bool(state.configuration.sharedSecret != nil),
            "latency_ms": .int(state.configuration.latencyMs),
            "outage": .bool(state.configuration.outage),
        ] as JSONValue)
    }

    /// `{"count", "production", "sandbox", "passwords": [...], "requests": [...]}`: every password seen once,
    /// in order of first use, and the newest requests, oldest first.
    private func requestsResponse() -> HTTPResponse {
        var passwords: [JSONValue] = []
        var seen: Set<String> = []
        for password in state.received.compactMap(\.password) where seen.insert(password).inserted {
            passwords.append(.string(password))
        }
        let production = state.counts[.production, default: 0], sandbox = state.counts[.sandbox, default: 0]
        return .json([
            "count": .int(production + sandbox), "production": .int(production), "sandbox": .int(sandbox),
            "passwords": .array(passwords),
            "requests": .array(state.received.map { request in
                .object([
                    "environment": .string(request.environment.rawValue),
                    "password": request.password.map(JSONValue.string) ?? .null,
                    "receipt_data": request.receiptData.map(JSONValue.string) ?? .null,
                    "exclude_old_transactions": request.excludeOldTransactions.map(JSONValue.bool) ?? .null,
                ])
            }),
        ] as JSONValue)
    }

    private static func object(_ request: HTTPRequest) throws -> [String: JSONValue] {
        guard case .object(let object) = try request.decodeJSON(JSONValue.self) else {
            throw ProblemError.badRequest("The request body must be a JSON object.")
        }
        return object
    }
}
