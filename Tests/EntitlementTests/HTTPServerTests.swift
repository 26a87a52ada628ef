import Foundation
import Testing
@testable import AppStore
@testable import EntitlementService
@testable import FakeAppStore
@testable import ServiceRuntime

/// The server over real loopback sockets: framing, keep-alive, pipelining, bodies, routing and problems.
@Suite struct HTTPServerTests {
    @Test func healthzCarriesFramingHeaders() async throws {
        let server = try await HTTPTestServer.start()
        let response = try await server.request("/healthz")
        #expect(response.status == 200)
        #expect(response.text == #"{"status":"ok"}"#)
        #expect(response.headers["Content-Type"] == "application/json")
        #expect(response.headers["Content-Length"] == "15")
        #expect(response.headers["Date"]?.hasSuffix(" GMT") == true)
        #expect(response.headers["X-Request-Id"].map(RequestID.isSane) == true)
        #expect(response.headers["Connection"] == nil)
        await server.shutdown()
    }

    /// A handler that suspends runs with its request's id bound for the log (`Log.requestID`), after its awaits too.
    @Test func aSuspendingHandlerLogsUnderItsRequestID() async throws {
        let server = try await HTTPTestServer.start()
        let given = try await server.request("/logged-request", headers: [("X-Request-Id", "abc-456")])
        #expect(String(decoding: given.body, as: UTF8.self) == "abc-456")
        let generated = try await server.request("/logged-request")
        #expect(String(decoding: generated.body, as: UTF8.self) == generated.headers["X-Request-Id"])
        await server.shutdown()
    }

    @Test func saneIncomingRequestIDIsKeptOthersAreReplaced() async throws {
        let server = try await HTTPTestServer.start()
        let kept = try await server.request("/healthz", headers: [("X-Request-Id", "abc-123")])
        #expect(kept.headers["X-Request-Id"] == "abc-123")
        let tooLong = String(repeating: "x", count: 129)
        let replaced = try await server.request("/healthz", headers: [("X-Request-Id", tooLong)])
        #expect(replaced.headers["X-Request-Id"] != tooLong)
        #expect(replaced.headers["X-Request-Id"]?.count == 15)
        await server.shutdown()
    }

    @Test func requestFedOneByteAtATime() async throws {
        let server = try await HTTPTestServer.start()
        let port = server.port
        let response = try await offLoop {
            let client = try RawHTTPClient(port: port)
            for byte in Array(RawHTTPClient.request("POST", "/echo", body: "hello, byte by byte").utf8) {
                try client.send([byte])
            }
            return try client.readResponse()
        }
        #expect(response.status == 200)
        #expect(response.text == "hello, byte by byte")
        await server.shutdown()
    }

    @Test func hundredPipelinedRequestsAreAnsweredInOrder() async throws {
        let server = try await HTTPTestServer.start()
        let port = server.port
        let bodies = try await offLoop {
            let client = try RawHTTPClient(port: port)
            try client.send((0..<100).map { RawHTTPClient.request("GET", "/sequence/\($0)") }.joined())
            return try (0..<100).map { _ in try client.readResponse().text }
        }
        #expect(bodies == (0..<100).map(String.init))
        await server.shutdown()
    }

    /// An Upgrade offer (h2c, as Java's client makes on its first request; websocket) is declined by answering in
    /// HTTP/1.1: the connection stays open and the requests behind it, with a body or not, are answered.
    @Test func anUpgradeOfferIsAnsweredInHTTP1AndTheConnectionGoesOn() async throws {
        let server = try await HTTPTestServer.start()
        let port = server.port
        let (first, second, third) = try await offLoop {
            let client = try RawHTTPClient(port: port)
            let offer = [("Connection", "Upgrade, HTTP2-Settings"), ("Upgrade", "h2c"), ("HTTP2-Settings", "AAMAAABkAARAAAAAAAIAAAAA")]
            try client.send(RawHTTPClient.request("GET", "/healthz", headers: offer)
                + RawHTTPClient.request("POST", "/echo", headers: [("Connection", "Upgrade"), ("Upgrade", "websocket")], body: "after")
                + RawHTTPClient.request("GET", "/sequence/3"))
            return (try client.readResponse(), try client.readResponse(), try client.readResponse())
        }
        #expect(first.status == 200 && first.headers["Connection"] == nil)
        #expect(second.status == 200 && second.text == "after")
        #expect(third.status == 200 && third.text == "3")
        await server.shutdown()
    }

    @Test func keepAliveUntilConnectionClose() async throws {
        let server = try await HTTPTestServer.start()
        let port = server.port
        let (first, second, last, closed) = try await offLoop {
            let client = try RawHTTPClient(port: port)
            try client.send(RawHTTPClient.request("GET", "/healthz"))
            let first = try client.readResponse()
            try client.send(RawHTTPClient.request("GET", "/healthz"))
            let second = try client.readResponse()
            try client.send(RawHTTPClient.request("GET", "/healthz", headers: [("Connection", "close")]))
            let last = try client.readResponse()
            return (first, second, last, try client.waitForClose())
        }
        #expect(first.status == 200 && second.status == 200 && last.status == 200)
        #expect(first.headers["Connection"] == nil)
        #expect(last.headers["Connection"] == "close")
        #expect(closed)
        await server.shutdown()
    }

    @Test func http10ClosesUnlessKeepAliveIsAsked() async throws {
        let server = try await HTTPTestServer.start()
        let port = server.port
        let (kept, keptOpen, plain, plainClosed) = try await offLoop {
            let client = try RawHTTPClient(port: port)
            try client.send("GET /healthz HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
            let kept = try client.readResponse()
            let keptOpen = try !client.waitForClose(timeout: 0.2)
            try client.send("GET /healthz HTTP/1.0\r\n\r\n")
            let plain = try client.readResponse()
            return (kept, keptOpen, plain, try client.waitForClose())
        }
        #expect(kept.status == 200 && kept.headers["Connection"] == "keep-alive")
        #expect(keptOpen)
        #expect(plain.status == 200 && plain.headers["Connection"] == "close")
        #expect(plainClosed)
        await server.shutdown()
    }

    @Test func headAnswersTheLengthWithoutTheBody() async throws {
        let server = try await HTTPTestServer.start()
        let response = try await server.request("/healthz", method: "HEAD")
        #expect(response.status == 200)
        #expect(response.headers["Content-Length"] == "15")
        #expect(response.body.isEmpty)
        await server.shutdown()
    }

    @Test func chunkedRequestBodyIsReassembled() async throws {
        let server = try await HTTPTestServer.start()
        let port = server.port
        let response = try await offLoop {
            let client = try RawHTTPClient(port: port)
            try client.send("POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n")
            try client.send("7\r\n, world\r\n0\r\nX-Trailer: ignored\r\n\r\n")
            return try client.readResponse()
        }
        #expect(response.status == 200)
        #expect(response.text == "hello, world")
        await server.shutdown()
    }

    @Test func expectContinueGetsAnInterimAnswer() async throws {
        let server = try await HTTPTestServer.start()
        let port = server.port
        let (interim, final) = try await offLoop {
            let client = try RawHTTPClient(port: port)
            try client.send("POST /echo HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\nContent-Length: 4\r\n\r\n")
            let interim = try client.readResponse()
            try client.send("ping")
            return (interim, try client.readResponse())
        }
        #expect(interim.status == 100)
        #expect(final.status == 200 && final.text == "ping")
        await server.shutdown()
    }
}
