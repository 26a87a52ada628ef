import CUV
import Foundation

/// The HTTP/1.1 server: a listening uv TCP socket and the connections it accepts, all on the loop.
///
/// Each request is answered by the router; every request, answered or rejected before routing, is reported
/// once to the observers (by default the access log and the request metrics in `metrics`). `shutdown()`
/// stops accepting, lets the requests already received finish and their answers go out, closes idle
/// connections, then returns.
@Loop
public final class HTTPServer {
    /// The route label of requests rejected before routing (unreadable, too large, too slow, refused).
    public static let rejectedRoute = "rejected"
    /// Refused connections (503 answered, lingering) kept at once beyond `maxConnections`; more are dropped.
    static let maxRefusedConnections = 64

    /// The configuration as given; a `port` of 0 stays 0 here (`start()` returns the bound port).
    public let configuration: HTTPServerConfiguration
    let router: Router
    let metrics: Metrics
    private let observers: [any HTTPExchangeObserver]
    private var listener: UnsafeMutablePointer<uv_tcp_t>?
    private var connections: [ObjectIdentifier: HTTPConnection] = [:]
    private var refused: Set<ObjectIdentifier> = []
    /// Idle connections closed to make room for new ones, until their close completes: no longer serving.
    private var reclaiming: Set<ObjectIdentifier> = []
    private var shuttingDown = false
    /// Whether `shutdown()` has begun (for tests that must act while it is under way).
    var isShuttingDown: Bool { shuttingDown }
    private var shutdownWaiters: [CheckedContinuation<Void, Never>] = []

    /// A server answering with `router`. `metrics` holds its open-connections gauge; `observers` are told
    /// about every request, by default `HTTPAccessLog` and `HTTPRequestMetrics` in `metrics`.
    public init(configuration: HTTPServerConfiguration, router: Router, metrics: Metrics = .shared,
                observers: [any HTTPExchangeObserver]? = nil) {
        self.configuration = configuration
        self.router = router
        self.metrics = metrics
        self.observers = observers ?? [HTTPAccessLog(), HTTPRequestMetrics(metrics)]
    }

    /// Binds the configuration's host and port and listens; returns the bound port (the chosen one when the
    /// configuration says 0). A port another socket listens on fails with EADDRINUSE.
    public func start() throws -> Int {
        try start(socket: ListeningSocket.bind(host: configuration.host, port: configuration.port))
    }

    /// Listens on `fd`, a bound TCP socket (`ListeningSocket.bind`) or one already listening that a parent
    /// process handed down; the server owns it from now on. Returns its port.
    public func start(socket fd: Int32) throws -> Int {
        precondition(listener == nil && !shuttingDown, "HTTPServer.start called twice")
        let handle = UnsafeMutablePointer<uv_tcp_t>.allocate(capacity: 1)
        uv_tcp_init(EventLoop.shared.uv, handle)
        var status = uv_tcp_open(handle, uv_os_sock_t(fd))
        if status != 0 {
            close(fd)
        } else {
            status = uv_listen(cuv_stream(handle), Int32(clamping: configuration.backlog), Self.onConnection)
        }
        guard status == 0 else {
            uv_close(cuv_handle(handle), UVHandleClose.free)
            throw HTTPServerError(description: "listen on \(configuration.host):\(configuration.port) failed: \(String(cString: uv_strerror(status)))")
        }
        handle.pointee.data = Unmanaged.passRetained(self).toOpaque()
        listener = handle
        let port = ListeningSocket.localPort(handle) ?? configuration.port
        metrics.gauge("http_connections_open", "Client connections open, refused ones included.") { [weak self] in
            Double(self?.connections.count ?? 0)
        }
        Log.info("http_listening", ["host": configuration.host, "port": port])
        return port
    }

    /// Stops accepting, finishes in-flight requests and closes every connection; returns when all are closed.
    public func shutdown() async {
        if !shuttingDown {
            shuttingDown = true
            if let listener {
                uv_close(cuv_handle(listener), Self.onListenerClose)
            }
            for connection in Array(connections.values) {
                connection.shutdown()
            }
        }
        guard listener != nil || !connections.isEmpty else { return }
        await withCheckedContinuation { shutdownWaiters.append($0) }
    }

    private func accept(_ status: Int32) {
        guard status == 0, let listener, !shuttingDown else {
            if status != 0 { Log.warning("http_accept_failed", ["error": String(cString: uv_strerror(status))]) }
            return
        }
        let client = UnsafeMutablePointer<uv_tcp_t>.allocate(capacity: 1)
        uv_tcp_init(EventLoop.shared.uv, client)
        let serving = connections.count - refused.count - reclaiming.count
        guard uv_accept(cuv_stream(listener), cuv_stream(client)) == 0,
              serving < configuration.maxConnections || refused.count < Self.maxRefusedConnections else {
            uv_close(cuv_handle(client), UVHandleClose.free)
            return
        }
        uv_tcp_nodelay(client, 1)
        let connection = HTTPConnection(handle: client, server: self, configuration: configuration)
        let id = ObjectIdentifier(connection)
        connections[id] = connection
        if serving < configuration.maxConnections || reclaimIdleConnection() {
            connection.start()
        } else {
            refused.insert(id)
            Log.warning("http_connection_refused", ["open": serving, "limit": configuration.maxConnections])
            connection.refuse()
        }
    }

    /// At the connection limit, closes a keep-alive connection that waits between requests with nothing held, so
    /// that a new client is served rather than refused (otherwise clients that keep connections open and idle, as
    /// anyone may, would hold every place); false when every connection is busy. Its place frees when it has closed.
    private func reclaimIdleConnection() -> Bool {
        guard let idle = connections.first(where: { !refused.contains($0.key) && !reclaiming.contains($0.key) && $0.value.isIdleBetweenRequests })
        else { return false }
        reclaiming.insert(idle.key)
        Log.info("http_connection_reclaimed", ["limit": configuration.maxConnections])
        idle.value.reclaim()
        return true
    }

    /// Reports a finished or rejected request to every observer.
    func observe(_ exchange: HTTPExchange) {
        for observer in observers { observer.observe(exchange) }
    }

    func connectionClosed(_ connection: HTTPConnection) {
        let id = ObjectIdentifier(connection)
        connections[id] = nil
        refused.remove(id)
        reclaiming.remove(id)
        resumeWaitersIfDone()
    }

    private func listenerClosed() {
        listener = nil
        resumeWaitersIfDone()
    }

    private func resumeWaitersIfDone() {
        guard shuttingDown, listener == nil, connections.isEmpty else { return }
        let waiters = shutdownWaiters
        shutdownWaiters = []
        for waiter in waiters { waiter.resume() }
    }

    // MARK: - C callbacks
    //
    // Outside the actor's isolation, so libuv's calls cost no executor query (`Loop.assumeIsolated` checks).

    nonisolated private static let onConnection: uv_connection_cb = { stream, status in
        guard let data = stream?.pointee.data else { return }
        let server = Unmanaged<HTTPServer>.fromOpaque(data).takeUnretainedValue()
        Loop.assumeIsolated { server.accept(status) }
    }

    /// Drops the retain `start` took and lets `shutdown` return once the connections are closed too.
    nonisolated private static let onListenerClose: uv_close_cb = { handle in
        guard let handle else { return }
        let server = Unmanaged<HTTPServer>.fromOpaque(handle.pointee.data).takeRetainedValue()
        handle.deallocate()
        Loop.assumeIsolated { server.listenerClosed() }
    }
}
