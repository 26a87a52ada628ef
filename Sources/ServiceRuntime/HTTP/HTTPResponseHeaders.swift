/// Middleware that sets header fields on every answer of its group, problems included
/// (`Cache-Control: no-store` on per-user data): each replaces whatever the handler set under that name.
public struct HTTPResponseHeaders: HTTPMiddleware {
    private let fields: HTTPHeaders

    /// Middleware that sets each of `fields` on every answer, replacing the handler's values of that name.
    public init(_ fields: HTTPHeaders) {
        self.fields = fields
    }

    /// Sets the fields on what `next` answers, ready or pending; an abort passes through unchanged.
    public func handle(_ request: HTTPRequest, _ context: HTTPRequestContext, next: HTTPResponder) throws -> HTTPAnswer {
        var answer = next(request, context)
        if var response = answer.takeReadyResponse() {  // no closure to allocate for a ready answer
            apply(to: &response)
            return .response(response)
        }
        return answer.map { response in
            var response = response
            apply(to: &response)
            return response
        }
    }

    private func apply(to response: inout HTTPResponse) {
        for (name, value) in fields { response.headers.set(name, value) }
    }
}
