import Foundation
@testable import AppStore
@testable import EntitlementService
@testable import FakeAppStore
@testable import ServiceRuntime

/// A deliberately simple blocking HTTP/1.1 client over a POSIX socket, for tests that need exact control of
/// the bytes on the wire: partial requests, pipelining, junk, stalls. Every wait has a deadline. It must run
/// off the uv loop (see `offLoop`); it is used by one thread at a time.
final class RawHTTPClient: @unchecked Sendable {
    enum Failure: Error, CustomStringConvertible {
        case timedOut(String)
        case closed
        case malformed(String)
        case system(String)

        var description: String {
            switch self {
            case .timedOut(let what): "timed out waiting for \(what)"
            case .closed: "connection closed by the server"
            case .malformed(let what): "malformed response: \(what)"
            case .system(let what): what
            }
        }
    }

    /// One response as received.
    struct Response: Sendable {
        var status: Int
        var headers: HTTPHeaders
        var body: [UInt8]
        var text: String { String(decoding: body, as: UTF8.self) }

        /// The body parsed as a JSON object.
        func json() throws -> [String: Any] {
            guard let object = try JSONSerialization.jsonObject(with: Data(body)) as? [String: Any] else {
                throw Failure.malformed("body is not a JSON object: \(text)")
            }
            return object
        }
    }

    private let fd: Int32
    private var received: [UInt8] = []
    private var sawEOF = false

    /// Connects (blocking) to `host:port`.
    init(port: Int, host: String = "127.0.0.1") throws {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        inet_pton(AF_INET, host, &address.sin_addr)
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw Failure.system("socket: \(String(cString: strerror(errno)))") }
        let status = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard status == 0 else {
            let message = String(cString: strerror(errno))
            Glibc.close(fd)
            throw Failure.system("connect: \(message)")
        }
        var one: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
    }

    deinit { Glibc.close(fd) }

    /// The client end's port, which names the connection among the server's sockets.
    var localPort: Int {
        var address = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    /// Sends every byte, waiting at most `timeout` seconds for the socket to take them.
    func send(_ bytes: [UInt8], timeout: Double = 5) throws {
        let deadline = Self.now() + timeout
        var offset = 0
        while offset < bytes.count {
            try wait(for: Int16(POLLOUT), until: deadline, what: "the server to accept bytes")
            let sent = bytes[offset...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if sent < 0 {
                if errno == EINTR || errno == EAGAIN { continue }
                throw errno == EPIPE || errno == ECONNRESET ? Failure.closed : Failure.system("send: \(String(cString: strerror(errno)))")
            }
            offset += sent
        }
    }

    func send(_ text: String, timeout: Double = 5) throws {
        try send(Array(text.utf8), timeout: timeout)
    }

    /// Reads one response (status, headers, `Content-Length` body). Pass `bodyless` for answers to `HEAD`.
    func readResponse(timeout: Double = 5, bodyless: Bool = false) throws -> Response {
        let deadline = Self.now() + timeout
        var headEnd: Int?
        while headEnd == nil {
            headEnd = Self.find(Array("\r\n\r\n".utf8), in: received)
            if headEnd == nil { try fill(until: deadline, what: "a response head") }
        }
        let head = String(decoding: received[..<headEnd!], as: UTF8.self)
        var lines = head.components(separatedBy: "\r\n")
        let statusLine = lines.removeFirst().split(separator: " ", maxSplits: 2)
        guard statusLine.count >= 2, statusLine[0].hasPrefix("HTTP/1."), let status = Int(statusLine[1]) else {
            throw Failure.malformed("status line of \(head)")
        }
        var headers = HTTPHeaders()
        for line in lines {
            guard let colon = line.firstIndex(of: ":") else { throw Failure.malformed("header line \(line)") }
            headers.add(String(line[..<colon]), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces))
        }
        received.removeFirst(headEnd! + 4)
        let length = bodyless || status < 200 || status == 204 || status == 304 ? 0 : Int(headers["Content-Length"] ?? "")
        guard let length else { throw Failure.malformed("no Content-Length in \(head)") }
        while received.count < length { try fill(until: deadline, what: "a response body") }
        let body = Array(received[..<length])
        received.removeFirst(length)
        return Response(status: status, headers: headers, body: body)
    }

    /// Waits for the server to close the connection (EOF or reset), dropping anything it sends; false when
    /// it is still open after `timeout` seconds.
    func waitForClose(timeout: Double = 5) throws -> Bool {
        let deadline = Self.now() + timeout
        while !sawEOF {
            do {
                try fill(until: deadline, what: "close")
            } catch Failure.timedOut {
                return false
            } catch Failure.closed {
                return true
            }
            received.removeAll()
        }
        return true
    }

    /// Half-closes: the server sees EOF, we can still read.
    func shutdownWrite() {
        Glibc.shutdown(fd, Int32(SHUT_WR))
    }

    private func fill(until deadline: Double, what: String) throws {
        guard !sawEOF else { throw Failure.closed }
        try wait(for: Int16(POLLIN), until: deadline, what: what)
        var chunk = [UInt8](repeating: 0, count: 65536)
        let count = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        if count == 0 {
            sawEOF = true
            throw Failure.closed
        }
        if count < 0 {
            if errno == EINTR || errno == EAGAIN { return }
            if errno == ECONNRESET {
                sawEOF = true
                throw Failure.closed
            }
            throw Failure.system("recv: \(String(cString: strerror(errno)))")
        }
        received.append(contentsOf: chunk[..<count])
    }

    private func wait(for events: Int16, until deadline: Double, what: String) throws {
        while true {
            let remaining = deadline - Self.now()
            var descriptor = pollfd(fd: fd, events: events, revents: 0)
            let ready = poll(&descriptor, 1, Int32(max(0, min(remaining * 1000, 60_000)).rounded(.up)))
            if ready > 0 { return }
            if ready < 0 && errno != EINTR { throw Failure.system("poll: \(String(cString: strerror(errno)))") }
            if remaining <= 0 { throw Failure.timedOut(what) }
        }
    }

    private static func find(_ needle: [UInt8], in haystack: [UInt8]) -> Int? {
        guard haystack.count >= needle.count else { return nil }
        for start in 0...(haystack.count - needle.count) where haystack[start] == needle[0] {
            if Array(haystack[start..<start + needle.count]) == needle { return start }
        }
        return nil
    }

    static func now() -> Double {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
    }

    /// One exchange on a fresh connection, off the loop: connects to `port`, sends `request`, reads the answer
    /// (`bodyless` for answers to `HEAD`).
    static func exchange(port: Int, _ request: [UInt8], timeout: Double = 5, bodyless: Bool = false) async throws -> Response {
        try await offLoop {
            let client = try RawHTTPClient(port: port)
            try client.send(request)
            return try client.readResponse(timeout: timeout, bodyless: bodyless)
        }
    }

    static func exchange(port: Int, _ request: String, timeout: Double = 5, bodyless: Bool = false) async throws -> Response {
        try await exchange(port: port, Array(request.utf8), timeout: timeout, bodyless: bodyless)
    }

    /// The text of a simple request.
    static func request(_ method: String = "GET", _ target: String, headers: [(String, String)] = [], body: String? = nil) -> String {
        var text = "\(method) \(target) HTTP/1.1\r\nHost: test\r\n"
        for (name, value) in headers { text += "\(name): \(value)\r\n" }
        if let body { text += "Content-Length: \(body.utf8.count)\r\n\r\n\(body)" } else { text += "\r\n" }
        return text
    }
}

/// Runs blocking work on a thread of its own, so neither the uv loop nor the cooperative pool waits on it.
func offLoop<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        let thread = Thread {
            continuation.resume(with: Result { try work() })
        }
        thread.stackSize = 1 << 20
        thread.start()
    }
}
