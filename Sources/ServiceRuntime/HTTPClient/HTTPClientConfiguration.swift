/// Settings of an `HTTPClient`: trust, connection limits, default timeouts and the response size limit.
public struct HTTPClientConfiguration: Sendable {
    /// The PEM bundle of trusted CAs, parsed once and cached (`CURLOPT_CAINFO` + `CURLOPT_CA_CACHE_TIMEOUT`).
    public var caBundlePath: String
    /// Idle connections kept open for reuse (`CURLMOPT_MAXCONNECTS`).
    public var maxConnections: Int
    /// Concurrent connections to one host; 0 means unlimited (`CURLMOPT_MAX_HOST_CONNECTIONS`).
    public var maxHostConnections: Int
    /// Default limit for establishing a connection, TLS handshake included.
    public var connectTimeoutMs: Int
    /// Default limit for a whole exchange, connect included.
    public var totalTimeoutMs: Int
    /// The largest response body accepted; a larger one fails with `.responseTooLarge`, unless
    /// `truncatesLongBodies`.
    public var maxResponseBytes: Int
    /// When true, a body longer than `maxResponseBytes` is kept up to the limit and the rest read and dropped, so
    /// the response still counts: for callers that judge an answer by its status (webhook deliveries).
    public var truncatesLongBodies: Bool

    /// Defaults: the Debian/Ubuntu CA bundle, 64 idle connections, no per-host limit, 5 s connect, 10 s total, 4 MiB bodies; nothing is validated.
    public init(
        caBundlePath: String = "/etc/ssl/certs/ca-certificates.crt",
        maxConnections: Int = 64,
        maxHostConnections: Int = 0,
        connectTimeoutMs: Int = 5_000,
        totalTimeoutMs: Int = 10_000,
        maxResponseBytes: Int = 4 << 20,
        truncatesLongBodies: Bool = false
    ) {
        self.caBundlePath = caBundlePath
        self.maxConnections = maxConnections
        self.maxHostConnections = maxHostConnections
        self.connectTimeoutMs = connectTimeoutMs
        self.totalTimeoutMs = totalTimeoutMs
        self.maxResponseBytes = maxResponseBytes
        self.truncatesLongBodies = truncatesLongBodies
    }
}
