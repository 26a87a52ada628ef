import ServiceRuntime
/// Routes anyone may call: liveness, readiness, metrics and the OpenAPI description.
@Loop
struct SystemRoutes {
    let db: PostgresPool

    func register(on router: Router) {
        router.get("/healthz") { _, _ in Self.healthy }
        router.get("/readyz") { _, _ in
            do {
                _ = try await db.query("SELECT 1", [])
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
    private static let healthy = json(#"{"status":"ok"}"#)
    private static let openAPI = json(OpenAPIDocument.json)

    private static func json(_ text: String) -> HTTPResponse {
        var headers = HTTPHeaders()
        headers.add("Content-Type", "application/json")
        return HTTPResponse(status: 200, headers: headers, body: Array(text.utf8))
    }
}
