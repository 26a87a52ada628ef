import Testing
@testable import AppStore
@testable import EntitlementService
@testable import FakeAppStore
@testable import ServiceRuntime

/// Route matching and error mapping, without sockets.
@Suite struct HTTPRouterTests {
    @Loop private func router() -> Router {
        let router = Router()
        router.get("/v1/users/{user_id}/entitlements", name: "entitlements") { _, context in
            .text(try context.parameters.require("user_id", as: String.self))
        }
        router.post("/v1/receipts") { _, _ in .text("posted", status: 202) }
        router.get("/v1/receipts/{verification_id}") { _, _ in .text("one") }
        router.delete("/v1/admin/grants/{grant_id}") { _, _ in HTTPResponse(status: 204) }
        router.put("/v1/admin/products/{product_id}") { _, _ in .text("put") }
        router.get("/v1/admin/products") { _, _ in .text("list") }
        return router
    }

    private func request(_ method: String, _ path: String) -> HTTPRequest {
        HTTPRequest(method: method, path: path, requestID: "test")
    }

    /// What the connection does with a request: the answer at once, or the suspending chain's answer (an
    /// abort as status 0).
    @Loop private func respond(_ router: Router, _ request: HTTPRequest) async -> (response: HTTPResponse, route: String) {
        let (answer, route) = router.respond(to: request)
        return ((try? await answer.outcome.get()) ?? HTTPResponse(status: 0), route)
    }

    @Test @Loop func matchesPatternsAndDecodesParameters() async {
        let router = router()
        let (response, route) = await respond(router, request("GET", "/v1/users/caf%C3%A9%2F1/entitlements"))
        #expect(route == "/v1/users/{user_id}/entitlements")
        #expect(String(decoding: response.body, as: UTF8.self) == "café/1")
    }

    @Test @Loop func literalRouteAndParameterRouteOnTheSamePrefix() async {
        let router = router()
        #expect(await respond(router, request("GET", "/v1/admin/products")).route == "/v1/admin/products")
        #expect(await respond(router, request("PUT", "/v1/admin/products/p1")).route == "/v1/admin/products/{product_id}")
    }

    @Test @Loop func aParameterPatternAnswersAMethodItsLiteralTwinLacks() async {
        let router = Router()
        router.get("/v1/admin/products") { _, _ in .text("list") }
        router.post("/v1/admin/{kind}") { _, context in .text(try context.parameters.require("kind", as: String.self)) }
        router.get("/v1/{a}/{b}/{c}") { _, _ in .text("three") }
        let (posted, route) = await respond(router, request("POST", "/v1/admin/products"))
        #expect(route == "/v1/admin/{kind}")
        #expect(posted.body == Array("products".utf8))
        #expect(await respond(router, request("GET", "/v1/admin/products")).response.body == Array("list".utf8))
        #expect(await respond(router, request("HEAD", "/v1/x/y/z")).route == "/v1/{a}/{b}/{c}")
        #expect(await respond(router, request("DELETE", "/v1/admin/products")).response.status == 405)
    }

    @Test @Loop func unknownPathEmptySegmentAndTrailingSlashAre404() async {
        let router = router()
        for path in ["/nope", "/v1/users//entitlements", "/v1/admin/products/", "/v1/users/u/entitlements/x"] {
            let (response, route) = await respond(router, request("GET", path))
            #expect(response.status == 404, "\(path)")
            #expect(route == Router.unmatchedRoute)
        }
    }

    @Test @Loop func otherMethodIs405WithAllow() async {
        let router = router()
        let (response, route) = await respond(router, request("DELETE", "/v1/receipts"))
        #expect(response.status == 405)
        #expect(response.headers["Allow"] == "POST")
        #expect(route == "/v1/receipts")
        let (list, _) = await respond(router, request("POST", "/v1/admin/products"))
        #expect(list.headers["Allow"] == "GET, HEAD")
    }

    @Test @Loop func headFallsBackToGet() async {
        let router = router()
        let (response, route) = await respond(router, request("HEAD", "/v1/admin/products"))
        #expect(response.status == 200)
        #expect(route == "/v1/admin/products")
    }

    @Test @Loop func synchronousHandlersAnswerAtOnceAndSuspendingOnesRunLater() async {
        let router = Router()
        router.get("/now") { _, _ in .text("now") }
        router.get("/later/{id}") { _, context in
            await Task.yield()
            return .text(try context.parameters.require("id", as: String.self))
        }
        router.get("/fails") { _, _ in throw ProblemError(status: 409, detail: "no") }
        let immediate = router.respond(to: request("GET", "/now"))
        guard case .ready(.success(let now)) = immediate.answer, immediate.route == "/now" else {
            Issue.record("a synchronous handler should answer at once")
            return
        }
        #expect(String(decoding: now.body, as: UTF8.self) == "now")
        let failing = router.respond(to: request("GET", "/fails"))
        guard case .ready(.success(let failed)) = failing.answer, failing.route == "/fails" else {
            Issue.record("a synchronous handler's problem should answer at once")
            return
        }
        #expect(failed.status == 409)
        let later = router.respond(to: request("GET", "/later/7"))
        guard case .pending(let work) = later.answer, later.route == "/later/{id}" else {
            Issue.record("a suspending handler should be left to a task")
            return
        }
        #expect(String(decoding: (try? await work().get())?.body ?? [], as: UTF8.self) == "7")
    }

    @Test @Loop func anUnreachableDatabaseIs503WithRetryAfterAndAnyOtherFailure500() async {
        let router = Router()
        router.get("/down") { _, _ in
            await Task.yield()
            throw PostgresError(kind: .connection, message: "connection refused")
        }
        router.get("/slow") { _, _ in throw PostgresError(kind: .timeout, message: "pool acquire timed out") }
        router.get("/broken") { _, _ in throw PostgresError(kind: .server, message: "syntax error", sqlState: "42601") }
        router.get("/cancelled") { _, _ in
            throw PostgresError(kind: .server, message: "canceling statement due to statement timeout", sqlState: "57014")
        }
        let down = await respond(router, request("GET", "/down")).response
        #expect(down.status == 503)
        #expect(down.headers["Retry-After"] == "5")
        #expect(down.headers["Content-Type"] == "application/problem+json")
        let slow = await respond(router, request("GET", "/slow")).response
        #expect(slow.status == 503)
        #expect(slow.headers["Retry-After"] == "5")
        let cancelled = await respond(router, request("GET", "/cancelled")).response
        #expect(cancelled.status == 503 && cancelled.headers["Retry-After"] == "5", "a statement out of time: \(cancelled.status)")
        let broken = await respond(router, request("GET", "/broken")).response
        #expect(broken.status == 500)
        #expect(broken.headers["Retry-After"] == nil)
        #expect(!String(decoding: broken.body, as: UTF8.self).contains("syntax error"))
    }

    @Test @Loop func routesAreListedWithTheirNames() {
        let router = router()
        #expect(router.routes.first == Router.Route(method: "GET", pattern: "/v1/users/{user_id}/entitlements", name: "entitlements"))
        #expect(router.routes.count == 6)
    }
}
