import CCurl
import CUV
import Foundation
import Testing
@testable import AppStore
@testable import EntitlementService
@testable import FakeAppStore
@testable import ServiceRuntime

/// The libcurl-backed HTTP client against a scripted loopback server.
@Suite(.serialized, .timeLimit(.minutes(1))) struct CurlClientTests {
    @Test @Loop func postDeliversBodyAndHeadersAndReturnsTheResponse() async throws {
        let client = HTTPClient(configuration: HTTPClientConfiguration())
        let body = Array("{\"receipt-data\":\"\u{00e9}\u{0000}x\"}".utf8) + Array(repeating: UInt8(ascii: "a"), count: 5000)
        try await ScriptedHTTPServer.run([
            .respond(status: 201, headers: [("Content-Type", "application/json"), ("X-Reply", "yes")], body: Array("{\"status\":0}".utf8)),
        ]) { server in
            let response = try await client.post(
                url: server.baseURL + "/verifyReceipt?x=1", body: body,
                headers: [("Content-Type", "application/json"), ("X-Trace", "abc def")])
            #expect(response.status == 201)
            #expect(response.body == Array("{\"status\":0}".utf8))
            #expect(response.header("content-type") == "application/json")
            #expect(response.header("X-REPLY") == "yes")
            let request = try #require(server.requests.first)
            #expect(request.method == "POST")
            #expect(request.target == "/verifyReceipt?x=1")
            #expect(request.body == body)
            #expect(request.header("Content-Type") == "application/json")
            #expect(request.header("X-Trace") == "abc def")
            #expect(request.header("Expect") == nil)
        }
        #expect(client.runningCount == 0)
        #expect(client.pollCount == 0)
    }

    @Test @Loop func getPassesErrorStatusesThrough() async throws {
        let client = HTTPClient(configuration: HTTPClientConfiguration())
        try await ScriptedHTTPServer.run([.respond(status: 503, body: Array("busy".utf8))]) { server in
            let response = try await client.get(url: server.baseURL + "/status")
            #expect(response.status == 503)
            #expect(response.body == Array("busy".utf8))
            #expect(server.requests.first?.method == "GET")
        }
    }

    @Test @Loop func concurrentRequestsOverlapOnTheOneLoop() async throws {
        let client = HTTPClient(configuration: HTTPClientConfiguration())
        let count = 200, delayMs = 300
        try await ScriptedHTTPServer.run(Array(repeating: .ok("slow", delayMs: delayMs), count: count)) { server in
            let clock = ContinuousClock()
            let started = clock.now
            let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
                for index in 0..<count {
                    let url = server.baseURL + "/n/\(index)"
                    group.addTask { try await client.post(url: url, body: Array("\(index)".utf8)).status }
                }
                var statuses: [Int] = []
                for try await status in group { statuses.append(status) }
                return statuses
            }
            let elapsed = clock.now - started
            #expect(statuses == Array(repeating: 200, count: count))
            #expect(Set(server.requests.map(\.target)).count == count)
            // One at a time would take count × delay = 60 s.
            #expect(elapsed < .milliseconds(count * delayMs / 10), "took \(elapsed)")
        }
        #expect(client.pollCount == 0)
    }

    @Test @Loop func loopKeepsTurningWhileRequestsAreInFlight() async throws {
        let client = HTTPClient(configuration: HTTPClientConfiguration())
        let ticker = LoopTimer()
        var ticks: [UInt64] = []
        ticker.start(after: 5, repeat: 5) { ticks.append(uv_hrtime() / 1_000_000) }
        try await ScriptedHTTPServer.run(Array(repeating: .ok(delayMs: 300), count: 200)) { server in
            try await withThrowingTaskGroup(of: Void.self) { group in
                let url = server.baseURL + "/"
                for _ in 0..<200 {
                    group.addTask { _ = try await client.get(url: url) }
                }
                try await group.waitForAll()
            }
        }
        ticker.close()
        let gaps = zip(ticks.dropFirst(), ticks).map { $0 - $1 }
        #expect(ticks.count > 20)
        // A blocking client would stall the timer for at least one 300 ms answer.
        #expect(gaps.max() ?? 0 < 150, "largest gap between 5 ms ticks: \(gaps.max() ?? 0) ms")
    }

    @Test @Loop func stalledServerTimesOutWithinTheTotalTimeout() async throws {
        let client = HTTPClient(configuration: HTTPClientConfiguration(totalTimeoutMs: 400))
        try await ScriptedHTTPServer.run([.stall]) { server in
            let clock = ContinuousClock()
            let started = clock.now
            let error = await #expect(throws: HTTPClientError.self) {
                try await client.post(url: server.baseURL + "/", body: [1, 2, 3])
            }
            #expect(error?.kind == .timeout)
            #expect(error?.curlCode == Int(CURLE_OPERATION_TIMEDOUT.rawValue))
            #expect(error?.message.contains("imed out") == true, "\(error?.message ?? "")")
            let elapsed = clock.now - started
            #expect(elapsed >= .milliseconds(350) && elapsed < .milliseconds(2_000), "took \(elapsed)")
        }
    }

    @Test @Loop func perRequestTimeoutOverridesTheDefault() async throws {
        let client = HTTPClient(configuration: HTTPClientConfiguration(totalTimeoutMs: 60_000))
        try await ScriptedHTTPServer.run([.stall]) { server in
            let error = await #expect(throws: HTTPClientError.self) {
                try await client.get(url: server.baseURL + "/", totalTimeoutMs: 200)
            }
            #expect(error?.kind == .timeout)
        }
    }

    @Test @Loop func closedPortIsAConnectError() async throws {
        let client = HTTPClient(configuration: HTTPClientConfiguration())
        let port = try BoundButNotListening()
        defer { port.close() }
        let error = await #expect(throws: HTTPClientError.self) {
            try await client.get(url: "http://127.0.0.1:\(port.port)/")
        }
        #expect(error?.kind == .connect)
        #expect(error?.curlCode == Int(CURLE_COULDNT_CONNECT.rawValue))
        #expect(client.pollCount == 0)
    }

    @Test @Loop func droppedConnectionIsReportedAsDropped() async throws {
        let client = HTTPClient(configuration: HTTPClientConfiguration())
        try await ScriptedHTTPServer.run([.drop]) { server in
            let error = await #expect(throws: HTTPClientError.self) {
                try await client.post(url: server.baseURL + "/", body: Array("x".utf8))
            }
            #expect(error?.kind == .connectionDropped)
            #expect(error?.curlCode == Int(CURLE_GOT_NOTHING.rawValue))
        }
    }

    @Test @Loop func sequentialRequestsReuseOneConnection() async throws {
        let client = HTTPClient(configuration: HTTPClientConfiguration())
        try await ScriptedHTTPServer.run(Array(repeating: .ok(), count: 5)) { server in
            for index in 0..<5 {
                let response = try await client.post(url: server.baseURL + "/\(index)", body: [UInt8(index)])
                #expect(response.status == 200)
            }
            #expect(server.connectionsAccepted == 1)
            #expect(Set(server.requests.map(\.connection)) == [1])
        }
    }

    @Test @Loop func oversizedResponseIsRefused() async throws {
        let client = HTTPClient(configuration: HTTPClientConfiguration(maxResponseBytes: 1024))
        try await ScriptedHTTPServer.run([
            .respond(status: 200, body: Array(repeating: 7, count: 1024)),
            .respond(status: 200, body: Array(repeating: 7, count: 1025)),
        ]) { server in
            let fits = try await client.get(url: server.baseURL + "/fits")
            #expect(fits.body.count == 1024)
            let error = await #expect(throws: HTTPClientError.self) {
                try await client.get(url: server.baseURL + "/too-big")
            }
            #expect(error?.kind == .responseTooLarge)
        }
    }

    @Test @Loop func cancellingTheTaskAbandonsTheTransfer() async throws {
        let client = HTTPClient(configuration: HTTPClientConfiguration())
        try await ScriptedHTTPServer.run([.stall]) { server in
            let task = Task { @Loop in
                try await client.post(url: server.baseURL + "/", body: [1])
            }
            await server.waitForRequests(1)
            #expect(client.runningCount == 1)
            task.cancel()
            let result = await task.result
            if case .failure(let error as HTTPClientError) = result {
                #expect(error.kind == .cancelled)
            } else {
                Issue.record("expected a cancellation error, got \(result)")
            }
            #expect(client.runningCount == 0)
            #expect(client.pollCount == 0)
            // The abandoned transfer's connection is closed, not parked for reuse.
            await server.waitForClientCloses(1)
        }
    }

    @Test @Loop func alreadyCancelledTaskSendsNothing() async throws {
        let client = HTTPClient(configuration: HTTPClientConfiguration())
        try await ScriptedHTTPServer.run([]) { server in
            let task = Task { @Loop in
                withUnsafeCurrentTask { $0?.cancel() }
                return try await client.get(url: server.baseURL + "/")
            }
            let result = await task.result
            if case .failure(let error as HTTPClientError) = result {
                #expect(error.kind == .cancelled)
            } else {
                Issue.record("expected a cancellation error, got \(result)")
            }
        }
    }

    @Test @Loop func releasingTheClientClosesItsIdleConnections() async throws {
        try await ScriptedHTTPServer.run([.ok()]) { server in
            var client: HTTPClient? = HTTPClient(configuration: HTTPClientConfiguration())
            let status = try await client?.get(url: server.baseURL + "/").status
            #expect(status == 200)
            #expect(server.connectionsClosedByClient == 0)
            client = nil
            await server.waitForClientCloses(1)
        }
    }

    @Test @Loop func headerValuesCannotInjectLines() async throws {
        let client = HTTPClient(configuration: HTTPClientConfiguration())
        try await ScriptedHTTPServer.run([]) { server in
            for value in ["a\r\nInjected: yes", "a\nInjected: yes", "a\rInjected: yes"] {
                let error = await #expect(throws: HTTPClientError.self) {
                    try await client.get(url: server.baseURL + "/", headers: [("X-Evil", value)])
                }
                #expect(error?.kind == .other)
                #expect(error?.message.contains("Injected") == false)
            }
        }
    }

    @Test @Loop func scriptedServerFlagsRequestsBeyondItsScript() async throws {
        let client = HTTPClient(configuration: HTTPClientConfiguration())
        await withKnownIssue {
            try await ScriptedHTTPServer.run([]) { server in
                let response = try await client.get(url: server.baseURL + "/extra")
                #expect(response.status == 500)
            }
        }
    }

    @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/openssl")))
    func tlsVerifiesAgainstTheConfiguredCABundle() async throws {
        let pki = try ThrowawayPKI()
        defer { pki.remove() }
        let server = try TLSTestServer(pki: pki, connections: 2)
        defer { server.stop() }
        let url = "https://localhost:\(server.port)/"

        let trusting = await HTTPClient(configuration: HTTPClientConfiguration(caBundlePath: pki.caPath))
        let response = try await trusting.get(url: url)
        #expect(response.status == 200)

        let systemTrust = await HTTPClient(configuration: HTTPClientConfiguration())
        let error = await #expect(throws: HTTPClientError.self) {
            try await systemTrust.get(url: url)
        }
        #expect(error?.kind == .tls)
        #expect(error?.curlCode == Int(CURLE_PEER_FAILED_VERIFICATION.rawValue))
    }
}

/// The pure pieces of the client: socket-interest mapping, error classes, response assembly.
@Suite struct CurlClientLogicTests {
    @Test func socketInterestMapsToPollActions() {
        let readable = CurlSocketEvents.readable, writable = CurlSocketEvents.writable
        #expect(CurlSocketEvents.action(what: CURL_POLL_IN, hasPoll: false) == .start(events: readable))
        #expect(CurlSocketEvents.action(what: CURL_POLL_OUT, hasPoll: false) == .start(events: writable))
        #expect(CurlSocketEvents.action(what: CURL_POLL_INOUT, hasPoll: false) == .start(events: readable | writable))
        #expect(CurlSocketEvents.action(what: CURL_POLL_IN, hasPoll: true) == .update(events: readable))
        #expect(CurlSocketEvents.action(what: CURL_POLL_INOUT, hasPoll: true) == .update(events: readable | writable))
        #expect(CurlSocketEvents.action(what: CURL_POLL_NONE, hasPoll: true) == .pause)
        #expect(CurlSocketEvents.action(what: CURL_POLL_NONE, hasPoll: false) == .ignore)
        #expect(CurlSocketEvents.action(what: CURL_POLL_REMOVE, hasPoll: true) == .close)
        #expect(CurlSocketEvents.action(what: CURL_POLL_REMOVE, hasPoll: false) == .ignore)
    }

    @Test func pollEventsMapToSocketActionFlags() {
        let readable = CurlSocketEvents.readable, writable = CurlSocketEvents.writable
        #expect(CurlSocketEvents.curlFlags(status: 0, events: readable) == CURL_CSELECT_IN)
        #expect(CurlSocketEvents.curlFlags(status: 0, events: writable) == CURL_CSELECT_OUT)
        #expect(CurlSocketEvents.curlFlags(status: 0, events: readable | writable) == CURL_CSELECT_IN | CURL_CSELECT_OUT)
        #expect(CurlSocketEvents.curlFlags(status: 0, events: CurlSocketEvents.disconnect) == CURL_CSELECT_IN)
        #expect(CurlSocketEvents.curlFlags(status: -104, events: readable) == CURL_CSELECT_ERR)
    }

    @Test(arguments: [
        (CURLE_OPERATION_TIMEDOUT, HTTPClientError.Kind.timeout),
        (CURLE_COULDNT_CONNECT, .connect),
        (CURLE_COULDNT_RESOLVE_HOST, .connect),
        (CURLE_GOT_NOTHING, .connectionDropped),
        (CURLE_RECV_ERROR, .connectionDropped),
        (CURLE_SEND_ERROR, .connectionDropped),
        (CURLE_PARTIAL_FILE, .connectionDropped),
        (CURLE_PEER_FAILED_VERIFICATION, .tls),
        (CURLE_SSL_CONNECT_ERROR, .tls),
        (CURLE_SSL_CACERT_BADFILE, .tls),
        (CURLE_FILESIZE_EXCEEDED, .responseTooLarge),
        (CURLE_WRITE_ERROR, .other),
        (CURLE_URL_MALFORMAT, .other),
    ])
    func curlCodesMapToErrorKinds(code: CURLcode, kind: HTTPClientError.Kind) {
        #expect(HTTPClientError.kind(curlCode: code, bodyLimitExceeded: false) == kind)
    }

    @Test func writeAbortFromTheBodyLimitIsTooLarge() {
        #expect(HTTPClientError.kind(curlCode: CURLE_WRITE_ERROR, bodyLimitExceeded: true) == .responseTooLarge)
    }

    @Test func headersOfTheFinalResponseHeadAreKept() {
        var response = ResponseAccumulator(bodyLimit: 10)
        for line in ["HTTP/1.1 100 Continue\r\n", "X-Interim: 1\r\n", "\r\n",
                     "HTTP/1.1 200 OK\r\n", "Content-Type:  application/json \r\n", "X-Folded: first\r\n",
                     "\t second\r\n", "Empty:\r\n", "not a header\r\n", "\r\n"] {
            response.receiveHeaderLine(Array(line.utf8))
        }
        #expect(response.headers.map(\.0) == ["Content-Type", "X-Folded", "Empty"])
        #expect(response.headers.map(\.1) == ["application/json", "first second", ""])
    }

    @Test func bodyStopsAtTheLimit() {
        var response = ResponseAccumulator(bodyLimit: 5)
        let accepted = [UInt8]("abc".utf8).withUnsafeBytes { response.receiveBody($0) }
        let refused = [UInt8]("def".utf8).withUnsafeBytes { response.receiveBody($0) }
        #expect(accepted && !refused)
        #expect(response.body == Array("abc".utf8))
        #expect(response.bodyLimitExceeded)
    }

    @Test func aTruncatingBodyKeepsWhatFitsAndGoesOn() {
        var response = ResponseAccumulator(bodyLimit: 5, truncates: true)
        let taken = ["abc", "def", "ghi"].map { chunk in [UInt8](chunk.utf8).withUnsafeBytes { response.receiveBody($0) } }
        #expect(taken == [true, true, true])
        #expect(response.body == Array("abcde".utf8))
        #expect(!response.bodyLimitExceeded)
    }
}

/// A loopback port that refuses connections: bound, so nothing else takes it, but not listening.
private struct BoundButNotListening {
    let fd: Int32
    let port: Int

    init() throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let fd = fd
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
        }
        guard bound else { throw POSIXError(.EADDRNOTAVAIL) }
        port = Int(UInt16(bigEndian: address.sin_port))
    }

    func close() { _ = Glibc.close(fd) }
}

/// A CA and a server certificate for `localhost` and 127.0.0.1, made with the `openssl` tool in a temp folder.
private struct ThrowawayPKI {
    let directory: URL
    var caPath: String { directory.appendingPathComponent("ca.pem").path }
    var certificatePath: String { directory.appendingPathComponent("server.pem").path }
    var keyPath: String { directory.appendingPathComponent("server.key").path }

    init() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("curl-tls-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        try "subjectAltName=DNS:localhost,IP:127.0.0.1\n".write(to: directory.appendingPathComponent("san.cnf"), atomically: true, encoding: .utf8)
        let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        try run(["req", "-x509"] + ec + ["-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=Throwaway Test CA"])
        try run(["req"] + ec + ["-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=localhost"])
        try run(["x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
                 "-out", "server.pem", "-days", "2", "-extfile", "san.cnf"])
    }

    func remove() { try? FileManager.default.removeItem(at: directory) }

    private func run(_ arguments: [String]) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        process.arguments = arguments
        process.currentDirectoryURL = directory
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { throw POSIXError(.EIO) }
    }
}

/// `openssl s_server -www` on a kernel-chosen loopback port, answering `GET /` with a status page.
private final class TLSTestServer {
    let port: Int
    private let process = Process()

    init(pki: ThrowawayPKI, connections: Int) throws {
        let output = Pipe()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        process.arguments = ["s_server", "-accept", "127.0.0.1:0", "-cert", pki.certificatePath, "-key", pki.keyPath,
                             "-www", "-naccept", "\(connections)"]
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        // s_server announces "ACCEPT 127.0.0.1:<port>" once it listens.
        var announced = ""
        func acceptLine() -> Substring? { announced.split(separator: "\n").first { $0.hasPrefix("ACCEPT ") } }
        while acceptLine() == nil {
            let chunk = output.fileHandleForReading.availableData
            guard !chunk.isEmpty else { break }
            announced += String(decoding: chunk, as: UTF8.self)
        }
        guard let port = acceptLine()?.split(separator: ":").last.flatMap({ Int($0) }) else {
            process.terminate()
            throw POSIXError(.EIO)
        }
        self.port = port
    }

    func stop() {
        if process.isRunning { process.terminate() }
        process.waitUntilExit()
    }
}
