/// Routes anyone may call: liveness, readiness, metrics and the OpenAPI description.
@Loop
struct SystemRoutes {
    let db: PostgresPool

    func register(on router: Router) {
        router.get("/healthz") { _ in .json(["status": "ok"]) }
        router.get("/readyz") { _ in
            do {
                _ = try await db.query("SELECT 1", [])
                return .json(["status": "ready"])
            } catch {
                Log.warning("not_ready", ["error": String(describing: error)])
                throw ProblemError(status: 503, detail: "The database does not answer.")
            }
        }
        router.get("/metrics") { _ in .text(Metrics.shared.render(), contentType: "text/plain; version=0.0.4; charset=utf-8") }
        router.get("/openapi.json") { _ in
            var headers = HTTPHeaders()
            headers.add("Content-Type", "application/json")
            return HTTPResponse(status: 200, headers: headers, body: Array(OpenAPIDocument.json.utf8))
        }
    }
}
