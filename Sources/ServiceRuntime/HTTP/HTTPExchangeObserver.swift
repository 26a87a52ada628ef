/// One request and how it ended, as the server reports it to its observers once the answer is decided: a
/// routed request when its handler's chain is done, a rejected one (unreadable, too large, too slow, over the
/// connection limit) when the connection's machine refuses it.
public struct HTTPExchange: Sendable, Equatable {
    /// The id its answer's `X-Request-Id` carries: the client's when sane, else a generated one.
    public var requestID: String
    /// The client's address as `address:port`, `-` when unknown.
    public var client: String
    /// The method as sent, `-` when the request was unreadable before its method.
    public var method: String
    /// The route pattern, `Router.unmatchedRoute` when none matched, `HTTPServer.rejectedRoute` when the
    /// request never reached the router.
    public var route: String
    /// The response's status; nil when a handler aborted the connection (`HTTPConnectionAbort`).
    public var status: Int?
    /// From the complete request to the decided answer (ns); nil for a rejected request.
    public var nanoseconds: UInt64?
    /// Why a rejected request was refused (its problem's detail); nil for a routed one.
    public var detail: String?

    init(requestID: String, client: String, method: String, route: String, status: Int?, nanoseconds: UInt64? = nil,
         detail: String? = nil) {
        self.requestID = requestID
        self.client = client
        self.method = method
        self.route = route
        self.status = status
        self.nanoseconds = nanoseconds
        self.detail = detail
    }
}

/// Told about every request a server answers or refuses, rejected ones included: the access log
/// (`HTTPAccessLog`) and the request metrics (`HTTPRequestMetrics`). Called on the loop, on the request's
/// path: it must not block.
@Loop
public protocol HTTPExchangeObserver {
    func observe(_ exchange: HTTPExchange)
}
