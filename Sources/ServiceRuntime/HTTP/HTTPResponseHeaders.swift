/// Middleware that sets header fields on every answer of its group, problems included
/// (`Cache-Control: no-store` on per-user data): each replaces whatever the handler set under that name.
public struct HTTPResponseHeaders: HTTPMiddleware {
    private let fields: HTTPHeaders

    public init(_ fields: HTTPHeaders) {
        self.fields = fields
    }

    public func handle(_ request: HTTPRequest, _ context: HTTPRequestContext, next: HTTPResponder) throws -> HTTPAnswer {
        let fields = self.fields
        return next(request, context).map { response in
            var response = response
            for (name, value) in fields { response.headers.set(name, value) }
            return response
        }
    }
}
