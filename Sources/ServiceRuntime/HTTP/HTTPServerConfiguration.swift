/// Where the HTTP server listens and the limits it holds clients to.
public struct HTTPServerConfiguration: Sendable, Equatable {
    /// An IPv4 or IPv6 literal (`127.0.0.1`, `0.0.0.0`, `::1`, `::`).
    public var host: String
    /// The TCP port; 0 picks a free one (`HTTPServer.start()` returns it).
    public var port: Int
    /// Connections served at once; beyond this a new connection gets a 503 problem and is closed (while at most
    /// `HTTPServer.maxRefusedConnections` are being refused; more are closed without an answer).
    public var maxConnections: Int
    /// How long a client may take to send a request head once it connected or began the request, and how
    /// long it may pause while sending a body. A stalled client gets a 408 and is closed.
    public var headerTimeoutMs: Int
    /// How long an idle keep-alive connection (or one whose client stopped reading) stays open.
    public var idleTimeoutMs: Int
    /// How long a closing connection keeps reading and discarding so the client sees the last answer.
    public var lingerTimeoutMs: Int
    /// The slowest a request body may arrive, on average since its head, once `minBodyRateGraceMs` has passed
    /// (bytes per second; 0: any rate, each piece still within `headerTimeoutMs` of the last). A slower client gets
    /// a 408 and is closed, so trickled bodies cannot hold connections ("slow POST"). Kestrel's defaults.
    public var minBodyBytesPerSecond: Int
    /// Time after the head during which `minBodyBytesPerSecond` is not enforced.
    public var minBodyRateGraceMs: Int
    /// Largest request body; larger ones get a 413.
    public var maxBodyBytes: Int
    /// Largest request line plus header block; larger ones get a 431 (414 for the request line alone).
    public var maxHeaderBytes: Int
    /// Most header fields in one request; more get a 431.
    public var maxHeaders: Int
    /// Pipelined requests held (received, running or being written) before the connection stops reading.
    public var maxPendingRequests: Int
    /// The listen backlog.
    public var backlog: Int

    /// Defaults: `127.0.0.1:8080`, 1024 connections, 10 s/60 s/2 s timeouts, 240 B/s after 5 s, 1 MiB bodies, 16 KiB heads; nothing is validated.
    public init(
        host: String = "127.0.0.1", port: Int = 8080, maxConnections: Int = 1024,
        headerTimeoutMs: Int = 10_000, idleTimeoutMs: Int = 60_000, lingerTimeoutMs: Int = 2_000,
        minBodyBytesPerSecond: Int = 240, minBodyRateGraceMs: Int = 5_000, maxBodyBytes: Int = 1 << 20, maxHeaderBytes: Int = 16 << 10, maxHeaders: Int = 100,
        maxPendingRequests: Int = 8, backlog: Int = 1024
    ) {
        self.host = host
        self.port = port
        self.maxConnections = maxConnections
        self.headerTimeoutMs = headerTimeoutMs
        self.idleTimeoutMs = idleTimeoutMs
        self.lingerTimeoutMs = lingerTimeoutMs
        self.minBodyBytesPerSecond = minBodyBytesPerSecond
        self.minBodyRateGraceMs = minBodyRateGraceMs
        self.maxBodyBytes = maxBodyBytes
        self.maxHeaderBytes = maxHeaderBytes
        self.maxHeaders = maxHeaders
        self.maxPendingRequests = maxPendingRequests
        self.backlog = backlog
    }
}
