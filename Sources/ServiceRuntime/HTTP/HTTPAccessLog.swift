/// The access log: one `http_request` line per request, routed or rejected, at `info`:
/// `request_id`, `client` (address:port), `method`, `route`, `status` (`aborted` when a handler dropped the connection), then
/// `duration_ms` (handler time) for a routed request or `detail` (why) for a rejected one.
public struct HTTPAccessLog: HTTPExchangeObserver {
    /// The access log; it has no settings (lines go through `Log` at `info`).
    public init() {}

    /// Writes the exchange's `http_request` line, unless `LOG_LEVEL` is above `info`.
    public func observe(_ exchange: HTTPExchange) {
        Self.line(exchange)?.emit()
    }

    /// The line of `exchange`; nil when `info` is not logged.
    nonisolated static func line(_ exchange: HTTPExchange) -> Log.Line? {
        guard var line = Log.Line(.info, "http_request") else { return nil }
        line.add("request_id", exchange.requestID)
        line.add("client", exchange.client)
        line.add("method", exchange.method)
        line.add("route", exchange.route)
        if let status = exchange.status { line.add("status", status) } else { line.add("status", "aborted") }
        if let nanoseconds = exchange.nanoseconds { line.add("duration_ms", milliseconds: nanoseconds) }
        if let detail = exchange.detail { line.add("detail", detail) }
        return line
    }
}
