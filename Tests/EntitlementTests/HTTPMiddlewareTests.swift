import Foundation
import Testing
@testable import AppStore
@testable import EntitlementService
@testable import FakeAppStore
@testable import ServiceRuntime

/// Route groups, middleware, typed path parameters, the identity slot and aborts, without sockets.
@Suite struct HTTPMiddlewareTests {
    /// Notes its name in the context on the way in and in an `X-Seen` field on the way out.
    struct Tag: HTTPMiddleware {
        var name: String

        func handle(_ request: HTTPRequest, _ context: HTTPRequestContext, next: HTTPResponder) throws -> HTTPAnswer {
            var context = context
            context.logMetadata.append((key: "seen", value: name))
            return next(request, context).map { response in
                var response = response
                response.headers.add("X-Seen", name)
                return response
            }
        }
    }

    /// Answers 401 itself unless the request carries `X-Let-In`; sets the identity when it lets the request in.
    struct Gate: HTTPMiddleware {
        func handle(_ request: HTTPRequest, _ context: HTTPRequestContext, next: HTTPResponder) throws -> HTTPAnswer {
            guard let name = request.headers["X-Let-In"] else { throw ProblemError(status: 401, detail: "no") }
            var context = context
            context.identity = name
            return next(request, context)
        }
    }

    private func request(_ method: String, _ path: String, headers: HTTPHeaders = HTTPHeaders()) -> HTTPRequest {
        HTTPRequest(method: method, path: path, headers: headers, requestID: "test")
    }

    /// The outcome the connection would get, waiting for a pending one; nil for an abort.
    @Loop private func response(_ router: Router, _ request: HTTPRequest) async -> HTTPResponse? {
        try? await router.respond(to: request).answer.outcome.get()
    }

    @Test @Loop func groupsPrefixTheirRoutesAndNestMiddlewareOutermostFirst() async {
        let router = Router()
        let v1 = router.group("/v1", Tag(name: "outer"))
        let admin = v1.group("/admin", Tag(name: "inner"))
        v1.get("/plain") { _, context in .text(context.logMetadata.map(\.value).joined(separator: ",")) }
        admin.get("/deep/{id}") { _, context in .text(context.logMetadata.map(\.value).joined(separator: ",")) }
        #expect(router.routes.map(\.pattern) == ["/v1/plain", "/v1/admin/deep/{id}"])

        let deep = await response(router, request("GET", "/v1/admin/deep/7"))
        #expect(deep.map { String(decoding: $0.body, as: UTF8.self) } == "outer,inner")
        #expect(deep?.headers.values(for: "X-Seen") == ["inner", "outer"])
        let plain = await response(router, request("GET", "/v1/plain"))
        #expect(plain.map { String(decoding: $0.body, as: UTF8.self) } == "outer")
        #expect(plain?.headers.values(for: "X-Seen") == ["outer"])
        // Routing problems run no middleware.
        let missing = await response(router, request("GET", "/v1/nothing"))
        #expect(missing?.status == 404)
        #expect(missing?.headers.values(for: "X-Seen") == [])
        #expect(await response(router, request("POST", "/v1/plain"))?.headers.values(for: "X-Seen") == [])
    }

    @Test @Loop func synchronousMiddlewareKeepsASynchronousRouteReadyAndMapsAPendingOne() async {
        let router = Router()
        let group = router.group("/g", Tag(name: "tag"))
        group.get("/now") { _, _ in .text("now") }
        group.get("/later") { _, _ in
            await Task.yield()
            return .text("later")
        }
        guard case .ready(.success(let now)) = router.respond(to: request("GET", "/g/now")).answer else {
            Issue.record("a synchronous handler behind synchronous middleware should answer at once")
            return
        }
        #expect(now.headers["X-Seen"] == "tag")
        guard case .pending(let work) = router.respond(to: request("GET", "/g/later")).answer else {
            Issue.record("a suspending handler should be left to a task")
            return
        }
        let later = try? await work().get()
        #expect(later.map { String(decoding: $0.body, as: UTF8.self) } == "later")
        #expect(later?.headers["X-Seen"] == "tag")
    }

    @Test @Loop func middlewareAnswersInsteadOfTheHandlerAndSeesRenderedErrors() async {
        let router = Router()
        let group = router.group("/g", Tag(name: "outer"), Gate())
        group.get("/who") { _, context in .text(try context.identity(as: String.self)) }
        group.get("/fails") { _, _ in throw ProblemError(status: 409, detail: "taken") }
        group.get("/breaks") { _, _ in throw HTTPTestServer.TestFailure(secret: "hunter2") }

        let refused = await response(router, request("GET", "/g/who"))
        #expect(refused?.status == 401)
        #expect(refused?.headers["X-Seen"] == "outer")
        let admitted = await response(router, request("GET", "/g/who", headers: ["X-Let-In": "alice"]))
        #expect(admitted.map { String(decoding: $0.body, as: UTF8.self) } == "alice")
        // A handler's problem and its unexpected failure reach the middleware as their responses.
        let failed = await response(router, request("GET", "/g/fails", headers: ["X-Let-In": "alice"]))
        #expect(failed?.status == 409)
        #expect(failed?.headers["X-Seen"] == "outer")
        let broken = await response(router, request("GET", "/g/breaks", headers: ["X-Let-In": "alice"]))
        #expect(broken?.status == 500)
        #expect(broken?.headers["X-Seen"] == "outer")
        #expect(!(broken.map { String(decoding: $0.body, as: UTF8.self) } ?? "").contains("hunter2"))
    }

    @Test @Loop func anIdentityNoMiddlewareSetIsAServerError() async {
        let router = Router()
        router.get("/who") { _, context in .text(try context.identity(as: String.self)) }
        #expect(await response(router, request("GET", "/who"))?.status == 500)
    }

    /// A parameter type that validates itself, as a service declares one.
    struct Token: PathParameterValue {
        var text: String
        init?(pathParameter text: String) {
            guard text.count == 4 else { return nil }
            self.text = text
        }
        static let pathParameterRequirement = "must be 4 characters"
    }

    @Test @Loop func typedParametersValidateThemselvesAndNameTheFieldWhenTheyDoNot() async throws {
        let router = Router()
        router.get("/items/{token}") { _, context in .text(try context.parameters.require("token", as: Token.self).text) }
        router.get("/other/{token}") { _, context in .text(try context.parameters.require("nope", as: String.self)) }

        let fine = await response(router, request("GET", "/items/ab%20d"))
        #expect(fine.map { String(decoding: $0.body, as: UTF8.self) } == "ab d")
        let bad = try #require(await response(router, request("GET", "/items/abc")))
        #expect(bad.status == 400)
        #expect(bad.headers["Content-Type"] == "application/problem+json")
        let problem = try #require(try JSONSerialization.jsonObject(with: Data(bad.body)) as? [String: Any])
        #expect(problem["field"] as? String == "token")
        #expect(problem["detail"] as? String == "'token' must be 4 characters.")
        // Asking for a parameter the pattern lacks is the handler's bug, not the client's.
        #expect(await response(router, request("GET", "/other/abcd"))?.status == 500)
    }

    @Test @Loop func anAbortPassesThroughMiddlewareUnchanged() async {
        let router = Router()
        let group = router.group("/g", Tag(name: "tag"))
        group.get("/now") { _, _ in throw HTTPConnectionAbort() }
        group.get("/later") { _, _ in
            await Task.yield()
            throw HTTPConnectionAbort()
        }
        guard case .ready(.failure) = router.respond(to: request("GET", "/g/now")).answer else {
            Issue.record("a synchronous abort should be ready, as an abort")
            return
        }
        #expect(await router.respond(to: request("GET", "/g/later")).answer.outcome == .failure(HTTPConnectionAbort()))
    }
}
