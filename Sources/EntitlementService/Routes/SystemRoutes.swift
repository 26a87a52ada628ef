import ServiceRuntime
/// Routes anyone may call: liveness, readiness, metrics and the OpenAPI description.
@Loop
struct SystemRoutes {
    let db: PostgresPool

    func register(on router: Router) {
        router.get("/healthz") { _, _ in Self.healthy }
        router.get("/readyz") { _, _ in
            do {
                try await db.ping()
                return .json(["status": "ready"])
            } catch {
                Log.warning("not_ready", ["error": String(describing: error)])
                throw ProblemError.unavailable("The database does not answer.", retryAfterSeconds: 5)
            }
        }
        router.get("/metrics") { _, _ in .text(Metrics.shared.render(), contentType: Metrics.contentType) }
        router.get("/openapi.json") { _, _ in Self.openAPI }
    }

    /// Built once: the liveness answer is the hottest route and never changes.
    private static let healthy = json(Array(#"{"status":"ok"}"#.utf8))
    /// `Sources/EntitlementService/openapi.json` as it was at build time (SwiftPM's `embedInCode`), served
    /// byte for byte: no file is read at run time.
    private static let openAPI = json(PackageResources.openapi_json)

    private static func json(_ body: [UInt8]) -> HTTPResponse {
        var headers = HTTPHeaders()
        headers.add("Content-Type", "application/json")
        return HTTPResponse(status: 200, headers: headers, body: body)
    }
}
