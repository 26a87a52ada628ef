/// Refuses a query that gives a name twice (`?environment=Sandbox&environment=Production`) with a 400 naming it,
/// for routes whose parameters each take one value: `HTTPRequest.query` keeps only the last, and answering for a
/// value the client may not have meant is worse than saying so (as a JSON body giving a name twice is refused).
public struct UniqueQueryNames: HTTPMiddleware {
    /// The middleware; it has no settings.
    public init() {}

    /// Passes the request on unless its query gives a name twice; then throws a 400 naming it.
    public func handle(_ request: HTTPRequest, _ context: HTTPRequestContext, next: HTTPResponder) throws -> HTTPAnswer {
        if let name = request.repeatedQueryName {
            throw ProblemError.badRequest("'\(name)' is given more than once in the query; give it once.", field: name)
        }
        return next(request, context)
    }
}
