import Foundation
import Testing

/// A loopback HTTP/1.1 test double: answers a scripted list of steps, one per request, in arrival order,
/// and records every request and connection it sees.
///
/// It runs on plain POSIX sockets in its own thread (one `poll()` loop), listens on 127.0.0.1 with a port
/// the kernel picks, keeps connections alive between requests, and reads request bodies by Content-Length.
/// A request beyond the script gets a 500 with `Connection: close` and is recorded as a test issue when the
/// server stops. Use it through `run(_:_:)`, which stops it (and reports) however the body ends.
final class ScriptedHTTPServer: @unchecked Sendable {
    /// What the server does with the next request.
    enum Step: Sendable {
        /// Answer with `status`, `headers` (Content-Length is added) and `body`, after `delayMs`.
        case respond(status: Int, headers: [(String, String)] = [], body: [UInt8] = [], delayMs: Int = 0)
        /// Close the connection without answering.
        case drop
        /// Never answer; keep the connection open until the client closes it or the server stops.
        case stall

        /// A 200 with a text body.
        static func ok(_ body: String = "ok", delayMs: Int = 0) -> Step {
            .respond(status: 200, headers: [("Content-Type", "text/plain")], body: Array(body.utf8), delayMs: delayMs)
        }
    }

    /// One request as it arrived.
    struct Request: Sendable {
        let method: String
        let target: String
        let headers: [(String, String)]
        let body: [UInt8]
        /// The serial number (from 1) of the TCP connection that carried it.
        let connection: Int

        /// The first value of header `name`, compared case-insensitively.
        func header(_ name: String) -> String? {
            headers.first { $0.0.lowercased() == name.lowercased() }?.1
        }
    }

    /// Counters a test may wait on.
    struct Tally: Sendable {
        var requests = 0
        var connectionsAccepted = 0
        var connectionsClosedByClient = 0
    }

    /// The port the server listens on.
    let port: Int
    /// `http://127.0.0.1:<port>`.
    var baseURL: String { "http://127.0.0.1:\(port)" }

    private let listener: Int32
    private let wakeRead: Int32
    private let wakeWrite: Int32
    private let stopped = DispatchSemaphore(value: 0)
    private let sourceLocation: SourceLocation

    private let lock = NSLock()
    private var remaining: [Step]
    private var recorded: [Request] = []
    private var unexpected: [Request] = []
    private var tally = Tally()
    private var waiters: [(condition: @Sendable (Tally) -> Bool, continuation: CheckedContinuation<Void, Never>)] = []

    /// Runs a server with `script` for the duration of `body`, then stops it and records an issue for each
    /// request the script did not expect.
    static func run<T>(
        _ script: [Step],
        sourceLocation: SourceLocation = #_sourceLocation,
        isolation: isolated (any Actor)? = #isolation,
        _ body: (ScriptedHTTPServer) async throws -> T
    ) async throws -> T {
        let server = try ScriptedHTTPServer(script: script, sourceLocation: sourceLocation)
        do {
            let result = try await body(server)
            server.stop()
            return result
        } catch {
            server.stop()
            throw error
        }
    }

    private init(script: [Step], sourceLocation: SourceLocation) throws {
        remaining = script
        self.sourceLocation = sourceLocation
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
                bind(fd, pointer, length) == 0 && listen(fd, 1024) == 0 && getsockname(fd, pointer, &length) == 0
            }
        }
        guard bound else {
            let code = errno
            close(fd)
            throw POSIXError(.init(rawValue: code) ?? .EIO)
        }
        listener = fd
        port = Int(UInt16(bigEndian: address.sin_port))
        var pipeEnds: [Int32] = [0, 0]
        guard pipe(&pipeEnds) == 0 else { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
        wakeRead = pipeEnds[0]
        wakeWrite = pipeEnds[1]
        for descriptor in [listener, wakeRead] { _ = fcntl(descriptor, F_SETFL, fcntl(descriptor, F_GETFL) | O_NONBLOCK) }
        let thread = Thread { [self] in
            serve()
            stopped.signal()
        }
        thread.name = "scripted-http-server"
        thread.start()
    }

    /// Every request received so far, in arrival order.
    var requests: [Request] { lock.withLock { recorded } }
    /// TCP connections accepted so far.
    var connectionsAccepted: Int { lock.withLock { tally.connectionsAccepted } }
    /// Connections the client closed (the server saw end of stream or a reset).
    var connectionsClosedByClient: Int { lock.withLock { tally.connectionsClosedByClient } }

    /// Suspends until `count` requests have arrived.
    func waitForRequests(_ count: Int) async {
        await waitUntil { $0.requests >= count }
    }

    /// Suspends until the client has closed `count` connections.
    func waitForClientCloses(_ count: Int) async {
        await waitUntil { $0.connectionsClosedByClient >= count }
    }

    private func waitUntil(_ condition: @escaping @Sendable (Tally) -> Bool) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let satisfied = lock.withLock {
                if condition(tally) { return true }
                waiters.append((condition, continuation))
                return false
            }
            if satisfied { continuation.resume() }
        }
    }

    /// Changes the counters under the lock and wakes the waiters whose condition now holds.
    private func update(_ change: (inout Tally) -> Void) {
        let ready: [CheckedContinuation<Void, Never>] = lock.withLock {
            change(&tally)
            let now = tally
            let met = waiters.filter { $0.condition(now) }.map(\.continuation)
            waiters.removeAll { $0.condition(now) }
            return met
        }
        for continuation in ready { continuation.resume() }
    }

    private func stop() {
        var byte: UInt8 = 1
        _ = write(wakeWrite, &byte, 1)
        stopped.wait()
        close(wakeWrite)
        close(wakeRead)
        close(listener)
        for request in lock.withLock({ unexpected }) {
            Issue.record("unexpected request beyond the script: \(request.method) \(request.target)", sourceLocation: sourceLocation)
        }
    }

    // MARK: - The server thread

    private final class Connection {
        let fd: Int32
        let serial: Int
        var input: [UInt8] = []
        var output: [UInt8] = []
        /// When a delayed answer is due (monotonic milliseconds) and what it is.
        var delayed: (due: UInt64, bytes: [UInt8])?
        var stalled = false
        var closeAfterOutput = false

        init(fd: Int32, serial: Int) {
            self.fd = fd
            self.serial = serial
        }

        /// Idle: no answer owed, so the next buffered request may be taken.
        var ready: Bool { output.isEmpty && delayed == nil && !stalled && !closeAfterOutput }
    }

    private func serve() {
        var connections: [Int32: Connection] = [:]
        var serials = 0
        func drop(_ connection: Connection) {
            close(connection.fd)
            connections[connection.fd] = nil
        }
        while true {
            let now = Self.nowMs()
            var timeout: Int32 = -1
            for connection in connections.values {
                guard let delayed = connection.delayed else { continue }
                let wait = Int32(clamping: delayed.due > now ? delayed.due - now : 0)
                timeout = timeout < 0 ? wait : min(timeout, wait)
            }
            var fds = [pollfd(fd: wakeRead, events: Int16(POLLIN), revents: 0), pollfd(fd: listener, events: Int16(POLLIN), revents: 0)]
            for connection in connections.values {
                let events = connection.output.isEmpty ? POLLIN : POLLIN | POLLOUT
                fds.append(pollfd(fd: connection.fd, events: Int16(events), revents: 0))
            }
            guard poll(&fds, nfds_t(fds.count), timeout) >= 0 || errno == EINTR else { break }
            if fds[0].revents != 0 { break }
            if fds[1].revents != 0 {
                while case let fd = accept(listener, nil, nil), fd >= 0 {
                    _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
                    serials += 1
                    connections[fd] = Connection(fd: fd, serial: serials)
                    update { $0.connectionsAccepted += 1 }
                }
            }
            let dueBy = Self.nowMs()
            for connection in connections.values {
                if let delayed = connection.delayed, delayed.due <= dueBy {
                    connection.output += delayed.bytes
                    connection.delayed = nil
                }
            }
            for entry in fds.dropFirst(2) where entry.revents != 0 {
                guard let connection = connections[entry.fd] else { continue }
                if entry.revents & Int16(POLLIN | POLLHUP | POLLERR) != 0 {
                    var chunk = [UInt8](repeating: 0, count: 64 * 1024)
                    let count = recv(connection.fd, &chunk, chunk.count, 0)
                    if count == 0 || (count < 0 && errno != EAGAIN && errno != EINTR) {
                        drop(connection)
                        update { $0.connectionsClosedByClient += 1 }
                        continue
                    }
                    if count > 0 && !connection.stalled { connection.input += chunk[0..<count] }
                }
            }
            for connection in Array(connections.values) {
                if !connection.output.isEmpty {
                    let sent = connection.output.withUnsafeBytes { send(connection.fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                    if sent > 0 { connection.output.removeFirst(sent) }
                    if connection.output.isEmpty && connection.closeAfterOutput {
                        drop(connection)
                        continue
                    }
                }
                while connection.ready, let request = Self.takeRequest(from: &connection.input, connection: connection.serial) {
                    if !answer(request, on: connection) {
                        drop(connection)
                        break
                    }
                }
            }
        }
        for connection in connections.values { close(connection.fd) }
    }

    /// Records `request` and applies the next step to `connection`; false when the connection must be dropped.
    private func answer(_ request: Request, on connection: Connection) -> Bool {
        let step: Step? = lock.withLock {
            recorded.append(request)
            if remaining.isEmpty {
                unexpected.append(request)
                return nil
            }
            return remaining.removeFirst()
        }
        update { $0.requests += 1 }
        switch step {
        case nil:
            connection.output += Self.encode(status: 500, headers: [("Connection", "close")], body: Array("unexpected request".utf8))
            connection.closeAfterOutput = true
        case .respond(let status, let headers, let body, let delayMs)?:
            let bytes = Self.encode(status: status, headers: headers, body: body)
            if delayMs > 0 {
                connection.delayed = (Self.nowMs() + UInt64(delayMs), bytes)
            } else {
                connection.output += bytes
            }
            connection.closeAfterOutput = headers.contains { $0.0.lowercased() == "connection" && $0.1.lowercased() == "close" }
        case .drop?:
            return false
        case .stall?:
            connection.stalled = true
        }
        return true
    }

    /// Removes one complete request from the front of `input`, if it holds one.
    private static func takeRequest(from input: inout [UInt8], connection: Int) -> Request? {
        let separator: [UInt8] = Array("\r\n\r\n".utf8)
        guard let headEnd = input.indices.dropLast(3).first(where: { input[$0..<$0 + 4].elementsEqual(separator) }) else { return nil }
        let lines = String(decoding: input[..<headEnd], as: UTF8.self).components(separatedBy: "\r\n")
        let requestLine = lines[0].split(separator: " ")
        let headers = lines.dropFirst().compactMap { line -> (String, String)? in
            guard let colon = line.firstIndex(of: ":") else { return nil }
            return (String(line[..<colon]), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces))
        }
        let length = headers.first { $0.0.lowercased() == "content-length" }.flatMap { Int($0.1) } ?? 0
        let bodyStart = headEnd + 4
        guard input.count >= bodyStart + length else { return nil }
        let request = Request(
            method: requestLine.first.map(String.init) ?? "",
            target: requestLine.count > 1 ? String(requestLine[1]) : "",
            headers: headers,
            body: Array(input[bodyStart..<bodyStart + length]),
            connection: connection)
        input.removeFirst(bodyStart + length)
        return request
    }

    private static func encode(status: Int, headers: [(String, String)], body: [UInt8]) -> [UInt8] {
        var head = "HTTP/1.1 \(status) \(status < 400 ? "OK" : "Error")\r\n"
        for (name, value) in headers { head += "\(name): \(value)\r\n" }
        head += "Content-Length: \(body.count)\r\n\r\n"
        return Array(head.utf8) + body
    }

    private static func nowMs() -> UInt64 {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return UInt64(now.tv_sec) * 1000 + UInt64(now.tv_nsec) / 1_000_000
    }
}
