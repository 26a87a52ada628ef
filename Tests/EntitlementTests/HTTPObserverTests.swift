import Testing
@testable import AppStore
@testable import EntitlementService
@testable import FakeAppStore
@testable import ServiceRuntime

/// The access log and the request metrics as the server's observers: routed, rejected and aborted requests.
@Suite struct HTTPObserverTests {
    private func text(_ line: Log.Line?) -> String {
        line.map { String(decoding: $0.finished(), as: UTF8.self) } ?? ""
    }

    @Test func accessLogLinesKeepTheirFormat() {
        let routed = HTTPExchange(requestID: "r1", client: "127.0.0.1:50000", method: "GET", route: "/healthz", status: 200, nanoseconds: 1_234_567)
        #expect(text(HTTPAccessLog.line(routed)).hasSuffix(
            " level=info event=http_request request_id=r1 client=127.0.0.1:50000 method=GET route=/healthz status=200 duration_ms=1.234\n"))
        let rejected = HTTPExchange(requestID: "r2", client: "[::1]:50001", method: "-", route: "rejected", status: 431, detail: "The request has too many header fields.")
        #expect(text(HTTPAccessLog.line(rejected)).hasSuffix(
            #" event=http_request request_id=r2 client=[::1]:50001 method=- route=rejected status=431 detail="The request has too many header fields.""# + "\n"))
        let aborted = HTTPExchange(requestID: "r3", client: "-", method: "POST", route: "/verifyReceipt", status: nil, nanoseconds: 5_000)
        #expect(text(HTTPAccessLog.line(aborted)).hasSuffix(" route=/verifyReceipt status=aborted duration_ms=0.005\n"))
    }

    @Test func aHandlerAbortsTheConnectionWithoutAnswering() async throws {
        let server = try await HTTPTestServer.start { router in
            router.get("/abort") { _, _ in
                await Task.yield()
                throw HTTPConnectionAbort()
            }
        }
        let port = server.port
        let (answered, closed) = try await offLoop {
            let client = try RawHTTPClient(port: port)
            try client.send(RawHTTPClient.request("GET", "/abort") + RawHTTPClient.request("GET", "/healthz"))
            let answered = (try? client.readResponse()) != nil
            return (answered, try client.waitForClose())
        }
        #expect(!answered, "an aborted request gets no answer, nor do those pipelined behind it")
        #expect(closed)
        let text = await Task { @Loop in server.metrics.render() }.value
        #expect(text.contains(#"http_requests_total{route="/abort",method="GET",status="aborted"} 1"#))
        #expect(text.contains(#"http_request_duration_seconds_count{route="/abort"} 1"#))
        let aborted = await Task { @Loop in server.exchanges.exchanges.filter { $0.route == "/abort" } }.value
        #expect(aborted.count == 1 && aborted.first?.status == nil)
        #expect(try await server.request("/healthz").status == 200)
        await server.shutdown()
    }

    @Test func requestsTheRouterNeverSeesAreLoggedAndCounted() async throws {
        let server = try await HTTPTestServer.start(HTTPServerConfiguration(maxBodyBytes: 10))
        let tooLarge = try await server.request("/echo", method: "POST", body: String(repeating: "x", count: 11))
        #expect(tooLarge.status == 413)
        let junk = try await RawHTTPClient.exchange(port: server.port, "\u{1}junk\r\n\r\n")
        #expect(junk.status == 400)
        let rejected = await Task { @Loop in server.exchanges.exchanges.filter { $0.route == HTTPServer.rejectedRoute } }.value
        #expect(rejected.map(\.status) == [413, 400])
        #expect(rejected.allSatisfy { $0.detail != nil && $0.nanoseconds == nil && !$0.requestID.isEmpty })
        #expect(rejected.first?.method == "POST")
        let routed = try await server.request("/healthz")
        #expect(routed.status == 200)
        let all = await Task { @Loop in server.exchanges.exchanges }.value
        for exchange in all {
            let port = exchange.client.hasPrefix("127.0.0.1:") ? Int(exchange.client.dropFirst(10)) : nil
            #expect(port.map { $0 > 0 && $0 != server.port } == true, "the client's own address and port: \(exchange.client)")
        }
        let text = await Task { @Loop in server.metrics.render() }.value
        #expect(text.contains(#"http_requests_total{route="rejected",method="POST",status="413"} 1"#))
        #expect(text.contains(#"status="400"} 1"#))
        #expect(!text.contains(#"http_request_duration_seconds_count{route="rejected"}"#))
        await server.shutdown()
    }
}
