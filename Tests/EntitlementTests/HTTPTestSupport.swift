@testable import AppStore
@testable import EntitlementService
@testable import FakeAppStore
@testable import ServiceRuntime

/// A server on an ephemeral loopback port with a few test routes, its own metrics registry, and a record of
/// what its observers were told.
struct HTTPTestServer: Sendable {
    let server: HTTPServer
    let port: Int
    let metrics: Metrics
    let exchanges: ExchangeRecorder

    /// Starts a server with `configuration` (its port is ignored) serving the test routes plus `extraRoutes`.
    static func start(
        _ configuration: HTTPServerConfiguration = HTTPServerConfiguration(),
        extraRoutes: @escaping @Sendable @Loop (Router) -> Void = { _ in }
    ) async throws -> HTTPTestServer {
        try await Task { @Loop in
            var configuration = configuration
            configuration.port = 0
            let router = Router()
            addTestRoutes(router)
            extraRoutes(router)
            let metrics = Metrics()
            let exchanges = ExchangeRecorder()
            let server = HTTPServer(configuration: configuration, router: router, metrics: metrics,
                                    observers: [exchanges, HTTPAccessLog(), HTTPRequestMetrics(metrics)])
            return HTTPTestServer(server: server, port: try server.start(), metrics: metrics, exchanges: exchanges)
        }.value
    }

    func shutdown() async {
        await server.shutdown()
    }

    /// Sends one request on a fresh connection and reads the answer.
    func request(_ target: String, method: String = "GET", headers: [(String, String)] = [], body: String? = nil) async throws -> RawHTTPClient.Response {
        try await RawHTTPClient.exchange(port: port, RawHTTPClient.request(method, target, headers: headers, body: body),
                                         bodyless: method == "HEAD")
    }

    @Loop private static func addTestRoutes(_ router: Router) {
        router.get("/healthz") { _, _ in .json(["status": "ok"]) }
        router.post("/echo") { request, _ in
            HTTPResponse(status: 200, headers: ["Content-Type": "application/octet-stream"], body: request.body)
        }
        router.get("/v1/users/{user_id}/entitlements") { request, context in
            .json(["user_id": try context.parameters.require("user_id", as: String.self), "at": request.query["at"] ?? ""])
        }
        router.get("/v1/users/{user_id}/transactions") { _, _ in .json(["route": "transactions"]) }
        router.get("/v1/users/me/entitlements") { _, _ in .json(["route": "literal"]) }
        router.get("/slow") { request, _ in
            await LoopTimer.sleep(milliseconds: UInt64(request.query["ms"] ?? "") ?? 200)
            return .json(["slept": request.query["ms"] ?? "200"])
        }
        router.get("/logged-request") { _, _ in
            await LoopTimer.sleep(milliseconds: 1)
            return .text(Log.requestID ?? "none")
        }
        router.get("/boom") { _, _ in throw TestFailure(secret: "database password is hunter2") }
        router.get("/problem") { _, _ in
            throw ProblemError(status: 422, title: "Receipt rejected", detail: "Apple rejected the receipt.", extra: ["apple_status": 21010])
        }
        router.get("/sequence/{n}") { _, context in .text(try context.parameters.require("n", as: String.self)) }
    }

    struct TestFailure: Error {
        let secret: String
    }
}

/// Every exchange a server reported, in order.
@Loop
final class ExchangeRecorder: HTTPExchangeObserver, Sendable {
    private(set) var exchanges: [HTTPExchange] = []

    func observe(_ exchange: HTTPExchange) {
        exchanges.append(exchange)
    }
}
