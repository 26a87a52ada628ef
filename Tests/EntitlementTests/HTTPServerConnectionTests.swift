import Testing
@testable import AppStore
@testable import EntitlementService
@testable import FakeAppStore
@testable import ServiceRuntime

/// Timeouts, the connection limit, slow clients and graceful shutdown.
@Suite struct HTTPServerConnectionTests {
    @Test func stalledClientGets408AndIsClosedAfterTheHeaderTimeout() async throws {
        let server = try await HTTPTestServer.start(HTTPServerConfiguration(headerTimeoutMs: 500))
        let port = server.port
        let (response, closed, elapsed) = try await offLoop {
            let client = try RawHTTPClient(port: port)
            let start = RawHTTPClient.now()
            try client.send("GET /healthz HTTP/1.1\r\nHost: t\r\nX-Half: ")
            let response = try client.readResponse(timeout: 5)
            return (response, try client.waitForClose(), RawHTTPClient.now() - start)
        }
        #expect(response.status == 408)
        #expect(response.headers["Connection"] == "close")
        #expect(closed)
        #expect(elapsed >= 0.4 && elapsed < 5)
        await server.shutdown()
    }

    /// A client trickling its body (each piece well within the pause limit) is cut off once it falls behind the
    /// minimum rate after the grace period: a 408, then the connection closes.
    @Test func aTrickledBodyGets408OnceItFallsBehindTheMinimumRate() async throws {
        let server = try await HTTPTestServer.start(HTTPServerConfiguration(
            headerTimeoutMs: 2_000, minBodyBytesPerSecond: 1_000, minBodyRateGraceMs: 300))
        let port = server.port
        let (response, sent, closed, elapsed) = try await offLoop {
            let client = try RawHTTPClient(port: port)
            let start = RawHTTPClient.now()
            try client.send("POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 10000\r\n\r\n")
            var sent = 0
            // 10 bytes every 50 ms: about 200 bytes/s, until an answer comes.
            while RawHTTPClient.now() - start < 5 {
                try client.send(Array(repeating: UInt8(ascii: "x"), count: 10))
                sent += 10
                do {
                    let response = try client.readResponse(timeout: 0.05)
                    return (response, sent, try client.waitForClose(), RawHTTPClient.now() - start)
                } catch RawHTTPClient.Failure.timedOut {
                    continue
                }
            }
            throw TestSetupError("no answer to a trickled body in 5 s")
        }
        #expect(response.status == 408)
        #expect(response.headers["Connection"] == "close")
        #expect(closed)
        #expect(elapsed >= 0.25 && elapsed < 1.9, "\(elapsed) s")
        #expect(sent < 1_000)
        await server.shutdown()
    }

    @Test func silentNewConnectionIsClosedAfterTheHeaderTimeout() async throws {
        let server = try await HTTPTestServer.start(HTTPServerConfiguration(headerTimeoutMs: 200))
        let port = server.port
        let closed = try await offLoop { try RawHTTPClient(port: port).waitForClose(timeout: 5) }
        #expect(closed)
        await server.shutdown()
    }

    @Test func idleKeepAliveConnectionIsClosedAfterTheIdleTimeout() async throws {
        let server = try await HTTPTestServer.start(HTTPServerConfiguration(idleTimeoutMs: 200))
        let port = server.port
        let (status, openAtFirst, closedLater) = try await offLoop {
            let client = try RawHTTPClient(port: port)
            try client.send(RawHTTPClient.request("GET", "/healthz"))
            let status = try client.readResponse().status
            let openAtFirst = try !client.waitForClose(timeout: 0.05)
            return (status, openAtFirst, try client.waitForClose(timeout: 5))
        }
        #expect(status == 200)
        #expect(openAtFirst)
        #expect(closedLater)
        await server.shutdown()
    }

    @Test func stalledClientsDoNotSlowAWellBehavedOne() async throws {
        let server = try await HTTPTestServer.start(HTTPServerConfiguration(headerTimeoutMs: 30_000))
        let port = server.port
        let (latencies, stallers) = try await offLoop {
            let stallers = try (0..<300).map { index in
                let client = try RawHTTPClient(port: port)
                try client.send("POST /echo HTTP/1.1\r\nHost: t\r\nX-Staller: \(index)\r\nContent-Le")
                return client
            }
            let client = try RawHTTPClient(port: port)
            var latencies: [Double] = []
            for _ in 0..<100 {
                let start = RawHTTPClient.now()
                try client.send(RawHTTPClient.request("GET", "/healthz"))
                guard try client.readResponse().status == 200 else { throw RawHTTPClient.Failure.malformed("status") }
                latencies.append(RawHTTPClient.now() - start)
            }
            // The stallers are all still connected and waiting.
            for staller in stallers where try staller.waitForClose(timeout: 0) {
                throw RawHTTPClient.Failure.malformed("a staller was closed early")
            }
            return (latencies.sorted(), stallers + [client])
        }
        let open = await Task { @Loop in server.metrics.render() }.value
            .split(separator: "\n").first { $0.hasPrefix("http_connections_open ") }
        #expect(open == "http_connections_open 301", "the server holds every staller and the client")
        #expect(latencies.count == 100)
        #expect(latencies[50] < 0.05, "median \(latencies[50]) s")
        #expect(latencies[99] < 1, "max \(latencies[99]) s")
        #expect(stallers.count == 301)
        await server.shutdown()
    }

    /// At the limit a new client takes the place of a keep-alive connection idle between requests (closed for it),
    /// so clients holding connections open cannot lock others out; when every connection is busy it gets 503.
    @Test func connectionsBeyondTheLimitTakeAnIdleOnesPlaceElseGet503() async throws {
        let server = try await HTTPTestServer.start(HTTPServerConfiguration(maxConnections: 2))
        let port = server.port
        let (served, idleClosed, taken, refused, refusedClosed, afterwards) = try await offLoop {
            let idle = try RawHTTPClient(port: port)
            try idle.send(RawHTTPClient.request("GET", "/healthz"))
            let served = try idle.readResponse().status
            let busy = try RawHTTPClient(port: port)
            try busy.send("GET /healthz HTTP/1.1\r\n")  // a request begun: not idle
            // At the limit: the idle connection is closed for the new one, which is served.
            let newcomer = try RawHTTPClient(port: port)
            let idleClosed = try idle.waitForClose()
            try newcomer.send(RawHTTPClient.request("GET", "/healthz"))
            let taken = try newcomer.readResponse().status
            try newcomer.send("GET /healthz HTTP/1.1\r\n")  // busy too now
            // Every connection busy: 503.
            let third = try RawHTTPClient(port: port)
            let refused = try third.readResponse()
            let refusedClosed = try third.waitForClose()
            // Free a place: the server notices the close, then takes a new client.
            busy.shutdownWrite()
            _ = try busy.waitForClose()
            var afterwards = 0
            let deadline = RawHTTPClient.now() + 5
            while afterwards != 200 && RawHTTPClient.now() < deadline {
                let fourth = try RawHTTPClient(port: port)
                try? fourth.send(RawHTTPClient.request("GET", "/healthz"))
                afterwards = (try? fourth.readResponse())?.status ?? 0
            }
            return (served, idleClosed, taken, refused, refusedClosed, afterwards)
        }
        #expect(served == 200 && idleClosed && taken == 200)
        #expect(refused.status == 503)
        #expect(refused.headers["Retry-After"] == "1")
        #expect(refused.headers["Content-Type"] == "application/problem+json")
        #expect(refused.headers["Connection"] == "close")
        #expect(refusedClosed)
        #expect(afterwards == 200)
        await server.shutdown()
    }

    @Test func gracefulShutdownFinishesTheInFlightRequest() async throws {
        let (entered, enteredContinuation) = AsyncStream<Void>.makeStream()
        let (release, releaseContinuation) = AsyncStream<Void>.makeStream()
        let server = try await HTTPTestServer.start { router in
            router.get("/gate") { _, _ in
                enteredContinuation.yield()
                // Held until the test has seen the shutdown begin: no sleep stands in for the ordering.
                for await _ in release { break }
                return .json(["finished": true])
            }
        }
        let port = server.port
        let idle = try await offLoop {
            let client = try RawHTTPClient(port: port)
            try client.send(RawHTTPClient.request("GET", "/healthz"))
            _ = try client.readResponse()
            return client
        }
        let inFlight = Task { try await RawHTTPClient.exchange(port: port, RawHTTPClient.request("GET", "/gate")) }
        var iterator = entered.makeAsyncIterator()
        await iterator.next()
        let shutdown = Task { await server.shutdown() }
        while !(await Task { @Loop in server.server.isShuttingDown }.value) {
            await Task.yield()
        }
        // The idle connection is closed while the in-flight request is still held.
        #expect(try await offLoop { try idle.waitForClose(timeout: 5) })
        releaseContinuation.yield()
        releaseContinuation.finish()
        let response = try await inFlight.value
        await shutdown.value
        #expect(response.status == 200)
        #expect(response.text == #"{"finished":true}"#)
        #expect(response.headers["Connection"] == "close")
        #expect(await Task { @Loop in server.server.isShuttingDown }.value)
        await #expect(throws: RawHTTPClient.Failure.self) { try await offLoop { try RawHTTPClient(port: port) } }
    }

    /// A request whose head and part of its body were in when the shutdown began is still read to its end and
    /// answered (the connection's last answer); the server then finishes.
    @Test func gracefulShutdownFinishesAHalfReceivedRequest() async throws {
        let server = try await HTTPTestServer.start()
        let port = server.port
        let client = try await offLoop {
            let client = try RawHTTPClient(port: port)
            try client.send("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nhalf")
            return client
        }
        // The server has the head and the first piece once it answers another request on a connection of its own.
        _ = try await RawHTTPClient.exchange(port: port, RawHTTPClient.request("GET", "/healthz"))
        let shutdown = Task { await server.shutdown() }
        while !(await Task { @Loop in server.server.isShuttingDown }.value) {
            await Task.yield()
        }
        let response = try await offLoop { () -> RawHTTPClient.Response in
            try client.send("-whole")
            return try client.readResponse()
        }
        await shutdown.value
        #expect(response.status == 200)
        #expect(response.text == "half-whole")
        #expect(response.headers["Connection"] == "close")
    }

    @Test func aPortInUseIsRefusedAndTheFirstServerKeepsIt() async throws {
        let first = try await HTTPTestServer.start()
        let port = first.port
        let refusal = await Task { @Loop in
            let server = HTTPServer(configuration: HTTPServerConfiguration(port: port), router: Router(), metrics: Metrics())
            do {
                _ = try server.start()
                return "started"
            } catch {
                return String(describing: error)
            }
        }.value
        #expect(refusal == "bind for 127.0.0.1:\(port) failed: Address already in use")
        #expect(try await first.request("/healthz").status == 200)
        await first.shutdown()
    }

    @Test func listensOnIPv6Loopback() async throws {
        let result = try await Task { @Loop in
            let server = HTTPServer(configuration: HTTPServerConfiguration(host: "::1", port: 0), router: Router(), metrics: Metrics())
            return (server, try server.start())
        }.value
        #expect(result.1 > 0)
        await result.0.shutdown()
    }

    @Test func metricsCountRequestsByRouteMethodAndStatus() async throws {
        let server = try await HTTPTestServer.start()
        _ = try await server.request("/healthz")
        _ = try await server.request("/healthz")
        _ = try await server.request("/nope")
        _ = try await server.request("/v1/users/u1/entitlements")
        let text = await Task { @Loop in server.metrics.render() }.value
        #expect(text.contains(#"http_requests_total{route="/healthz",method="GET",status="200"} 2"#))
        #expect(text.contains(#"http_requests_total{route="unmatched",method="GET",status="404"} 1"#))
        #expect(text.contains(#"http_requests_total{route="/v1/users/{user_id}/entitlements",method="GET",status="200"} 1"#))
        #expect(text.contains(#"http_request_duration_seconds_bucket{route="/healthz",le="+Inf"} 2"#))
        #expect(text.contains(#"http_request_duration_seconds_count{route="/healthz"} 2"#))
        #expect(text.contains("# TYPE http_request_duration_seconds histogram"))
        #expect(text.contains("http_connections_open "))
        await server.shutdown()
    }
}
