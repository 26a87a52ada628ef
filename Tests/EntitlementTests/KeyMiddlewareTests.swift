import Testing
@testable import AppStore
@testable import EntitlementService
@testable import FakeAppStore
@testable import ServiceRuntime

/// `/v1`'s middleware as the service stacks it, without the database: keys, scopes and the headers of the answers.
@Suite struct KeyMiddlewareTests {
    @Loop private func router() -> Router {
        let router = Router()
        let v1 = router.group("/v1", HTTPResponseHeaders(["Cache-Control": "no-store"]),
                              KeyAuthentication(keys: APIKeys(appKeys: ["app-key"], adminKeys: ["admin-key"])))
        v1.get("/users/{user_id}/entitlements") { _, context in
            let caller = try context.caller
            return .json(["key_id": caller.keyID, "actor": context.logMetadata.first { $0.key == "actor" }?.value ?? ""])
        }
        v1.group("/admin", AdminScope()).get("/products") { _, _ in .json(["products": [String]()]) }
        router.get("/healthz") { _, _ in .text("ok") }
        return router
    }

    @Loop private func call(_ router: Router, _ path: String, authorization: String?) async -> HTTPResponse? {
        var headers = HTTPHeaders()
        if let authorization { headers.add("Authorization", authorization) }
        return try? await router.respond(to: HTTPRequest(method: "GET", path: path, headers: headers, requestID: "t")).answer.outcome.get()
    }

    @Test(arguments: [nil, "Bearer wrong", "Basic app-key", "Bearer "])
    @Loop func everyRefusedKeyIs401WithABearerChallenge(authorization: String?) async throws {
        let router = router()
        for path in ["/v1/users/u1/entitlements", "/v1/admin/products"] {
            let response = try #require(await call(router, path, authorization: authorization))
            #expect(response.status == 401, "\(path)")
            #expect(response.headers["WWW-Authenticate"] == "Bearer", "\(path)")
            #expect(response.headers["Cache-Control"] == "no-store", "\(path)")
            #expect(response.headers["Content-Type"] == "application/problem+json")
            #expect(!String(decoding: response.body, as: UTF8.self).contains("wrong"))
        }
    }

    @Test @Loop func theCallerReachesTheHandlerAndAdminRoutesWantAnAdminKey() async throws {
        let router = router()
        let app = try #require(await call(router, "/v1/users/u1/entitlements", authorization: "Bearer app-key"))
        #expect(app.status == 200)
        #expect(String(decoding: app.body, as: UTF8.self) == #"{"actor":"app#1","key_id":"app#1"}"#)
        #expect(app.headers["Cache-Control"] == "no-store")
        #expect(app.headers["WWW-Authenticate"] == nil)
        let forbidden = try #require(await call(router, "/v1/admin/products", authorization: "Bearer app-key"))
        #expect(forbidden.status == 403)
        #expect(forbidden.headers["Cache-Control"] == "no-store")
        #expect(forbidden.headers["WWW-Authenticate"] == nil)
        #expect(try #require(await call(router, "/v1/admin/products", authorization: "Bearer admin-key")).status == 200)
        #expect(try #require(await call(router, "/v1/users/u1/entitlements", authorization: "Bearer admin-key")).status == 200)
        let open = try #require(await call(router, "/healthz", authorization: nil))
        #expect(open.status == 200)
        #expect(open.headers["Cache-Control"] == nil)
    }
}
