/// Counts every request in `metrics`: `http_requests_total` by route, method and status (`aborted` for a
/// dropped connection), and, for routed requests, the handler time in `http_request_duration_seconds`.
public struct HTTPRequestMetrics: HTTPExchangeObserver {
    private let metrics: Metrics

    /// Counts into `metrics` (the server's, by default `Metrics.shared`).
    public init(_ metrics: Metrics) {
        self.metrics = metrics
    }

    /// Records the exchange by route, method and status (nil: `aborted`), and a routed one's handler time in seconds.
    public func observe(_ exchange: HTTPExchange) {
        var seconds: Double?  // not `Optional.map`: a closure formed in `@Loop` code checks the executor when run
        if let nanoseconds = exchange.nanoseconds { seconds = Double(nanoseconds) / 1e9 }
        metrics.recordRequest(route: exchange.route, method: exchange.method, status: exchange.status, durationSeconds: seconds)
    }
}
