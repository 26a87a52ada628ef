import CCurl

/// The process's HTTP(S) client, running every exchange on the uv loop through one libcurl multi handle.
///
/// Connections are kept alive and reused across requests; TLS always verifies the peer against the
/// configured CA bundle, which libcurl parses once and caches. Each call has a connect and a total timeout
/// (the configuration's unless given). Cancelling the awaiting task abandons the exchange.
@Loop
public final class HTTPClient {

    /// The settings it was made with; its timeouts apply to calls that pass none.
    public let configuration: HTTPClientConfiguration
    private let multi: CurlMulti

    /// A client with its own libcurl multi handle, connection pool and DNS/TLS-session cache; nothing connects before a request.
    public init(configuration: HTTPClientConfiguration) {
        self.configuration = configuration
        multi = CurlMulti(maxConnections: configuration.maxConnections, maxHostConnections: configuration.maxHostConnections)
    }

    /// POSTs `body` to `url` and returns the response, whatever its status.
    public func post(
        url: String, body: [UInt8], headers: [(String, String)] = [],
        connectTimeoutMs: Int? = nil, totalTimeoutMs: Int? = nil
    ) async throws(HTTPClientError) -> HTTPClientResponse {
        try await perform(.post(body: body), url: url, headers: headers, connectTimeoutMs: connectTimeoutMs, totalTimeoutMs: totalTimeoutMs)
    }

    /// GETs `url` and returns the response, whatever its status.
    public func get(
        url: String, headers: [(String, String)] = [],
        connectTimeoutMs: Int? = nil, totalTimeoutMs: Int? = nil
    ) async throws(HTTPClientError) -> HTTPClientResponse {
        try await perform(.get, url: url, headers: headers, connectTimeoutMs: connectTimeoutMs, totalTimeoutMs: totalTimeoutMs)
    }

    /// Exchanges in progress.
    var runningCount: Int { multi.runningCount }
    /// Sockets being watched for libcurl right now (none once every exchange has finished).
    var pollCount: Int { multi.pollCount }

    private func perform(
        _ method: CurlTransfer.Request.Method, url: String, headers: [(String, String)],
        connectTimeoutMs: Int?, totalTimeoutMs: Int?
    ) async throws(HTTPClientError) -> HTTPClientResponse {
        guard !Task.isCancelled else {
            throw HTTPClientError(kind: .cancelled, curlCode: 0, message: "the awaiting task was cancelled")
        }
        let request = CurlTransfer.Request(
            method: method, url: url, headers: headers,
            // libcurl reads 0 as "no limit"; a caller out of time still gets a timeout.
            connectTimeoutMs: max(1, connectTimeoutMs ?? configuration.connectTimeoutMs),
            totalTimeoutMs: max(1, totalTimeoutMs ?? configuration.totalTimeoutMs))
        let transfer = try CurlTransfer(request, configuration: configuration, share: multi.share)
        let multi = multi
        let outcome = await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                transfer.attach(continuation)
                multi.add(transfer)
            }
        } onCancel: {
            Task.onLoop { multi.cancel(transfer) }
        }
        return try outcome.get()
    }
}
