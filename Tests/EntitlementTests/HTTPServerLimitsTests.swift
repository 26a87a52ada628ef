import Testing
@testable import AppStore
@testable import EntitlementService
@testable import FakeAppStore
@testable import ServiceRuntime

/// Malformed and oversized requests: each gets its problem answer and the connection is closed, and the
/// server keeps serving others.
@Suite struct HTTPServerLimitsTests {
    /// Sends `bytes` (the server may stop reading part-way), then returns the answer and whether the server
    /// closed the connection afterwards.
    private func exchange(_ server: HTTPTestServer, _ bytes: [UInt8]) async throws -> (RawHTTPClient.Response, Bool) {
        let port = server.port
        return try await offLoop {
            let client = try RawHTTPClient(port: port)
            do {
                try client.send(bytes, timeout: 10)
            } catch RawHTTPClient.Failure.closed {
                // The server answered and closed before taking everything; its answer is still readable.
            }
            let response = try client.readResponse()
            return (response, try client.waitForClose())
        }
    }

    private func expectStillServing(_ server: HTTPTestServer) async throws {
        let response = try await server.request("/healthz")
        #expect(response.status == 200)
    }

    @Test func junkBytesGet400AndClose() async throws {
        let server = try await HTTPTestServer.start()
        let (response, closed) = try await exchange(server, Array("\u{1}\u{2}junk that is not HTTP\r\n\r\n".utf8))
        #expect(response.status == 400)
        #expect(response.headers["Content-Type"] == "application/problem+json")
        #expect(response.headers["Connection"] == "close")
        #expect(closed)
        try await expectStillServing(server)
        await server.shutdown()
    }

    @Test func hundredKilobyteRequestLineGets414AndClose() async throws {
        let server = try await HTTPTestServer.start()
        let target = "/" + String(repeating: "a", count: 100_000)
        let (response, closed) = try await exchange(server, Array("GET \(target) HTTP/1.1\r\nHost: t\r\n\r\n".utf8))
        #expect(response.status == 414)
        #expect(closed)
        try await expectStillServing(server)
        await server.shutdown()
    }

    @Test func tenThousandHeadersGet431AndClose() async throws {
        let server = try await HTTPTestServer.start()
        var request = "GET /healthz HTTP/1.1\r\nHost: t\r\n"
        for index in 0..<10_000 { request += "X-H\(index): v\r\n" }
        let (response, closed) = try await exchange(server, Array((request + "\r\n").utf8))
        #expect(response.status == 431)
        #expect(closed)
        try await expectStillServing(server)
        await server.shutdown()
    }

    @Test func oversizedHeaderBlockGets431() async throws {
        let server = try await HTTPTestServer.start()
        let big = String(repeating: "b", count: 17_000)
        let (response, closed) = try await exchange(server, Array("GET /healthz HTTP/1.1\r\nX-Big: \(big)\r\n\r\n".utf8))
        #expect(response.status == 431)
        #expect(closed)
        try await expectStillServing(server)
        await server.shutdown()
    }

    @Test func contentLengthWithTransferEncodingGets400AndClose() async throws {
        let server = try await HTTPTestServer.start()
        let request = "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"
        let (response, closed) = try await exchange(server, Array(request.utf8))
        #expect(response.status == 400)
        #expect(closed)
        try await expectStillServing(server)
        await server.shutdown()
    }

    @Test func twoMebibyteBodyGets413() async throws {
        let server = try await HTTPTestServer.start()
        let body = String(repeating: "x", count: 2 << 20)
        let (response, closed) = try await exchange(server, Array(RawHTTPClient.request("POST", "/echo", body: body).utf8))
        #expect(response.status == 413)
        #expect(try response.json()["status"] as? Int == 413)
        #expect(closed)
        try await expectStillServing(server)
        await server.shutdown()
    }

    @Test func chunkedBodyOverTheLimitGets413() async throws {
        let server = try await HTTPTestServer.start(HTTPServerConfiguration(maxBodyBytes: 1000))
        let chunk = String(repeating: "y", count: 600)
        let request = "POST /echo HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n258\r\n\(chunk)\r\n258\r\n\(chunk)\r\n0\r\n\r\n"
        let (response, closed) = try await exchange(server, Array(request.utf8))
        #expect(response.status == 413)
        #expect(closed)
        try await expectStillServing(server)
        await server.shutdown()
    }

    /// CONNECT is answered, and the connection closed; an Upgrade is declined by answering in HTTP/1.1, and what
    /// follows must be HTTP again (a websocket frame sent without waiting for a 101 is a malformed request).
    @Test func connectIsAnsweredThenClosedAndAnUpgradeDeclined() async throws {
        let server = try await HTTPTestServer.start()
        let upgrade = "GET /healthz HTTP/1.1\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n\u{81}\u{85}frame"
        let (upgraded, upgradeClosed) = try await exchange(server, Array(upgrade.utf8))
        #expect(upgraded.status == 200)
        #expect(upgraded.headers["Connection"] == nil)
        #expect(upgradeClosed)
        let (connect, connectClosed) = try await exchange(server, Array("CONNECT example.com:443 HTTP/1.1\r\n\r\n".utf8))
        #expect((400..<500).contains(connect.status))
        #expect(connectClosed)
        try await expectStillServing(server)
        await server.shutdown()
    }

    @Test func answersBeforeAMalformedPipelinedRequestStillArrive() async throws {
        let server = try await HTTPTestServer.start()
        let port = server.port
        let (first, second, closed) = try await offLoop {
            let client = try RawHTTPClient(port: port)
            try client.send(RawHTTPClient.request("GET", "/sequence/1") + "BROKEN\r\n\r\n")
            return (try client.readResponse(), try client.readResponse(), try client.waitForClose())
        }
        #expect(first.status == 200 && first.text == "1")
        #expect(first.headers["Connection"] == nil)
        #expect(second.status == 400)
        #expect(closed)
        await server.shutdown()
    }
}
