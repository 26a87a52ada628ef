/// Counts every request in `metrics`: `http_requests_total` by route, method and status (`aborted` for a
/// dropped connection), and, for routed requests, the handler time in `http_request_duration_seconds`.
public struct HTTPRequestMetrics: HTTPExchangeObserver {
    private let metrics: Metrics

    public init(_ metrics: Metrics) {
        self.metrics = metrics
    }

    public func observe(_ exchange: HTTPExchange) {
        metrics.recordRequest(route: exchange.route, method: exchange.method, status: exchange.status,
                              durationSeconds: exchange.nanoseconds.map { Double($0) / 1e9 })
    }
}
