/// What makes a query unusable to a route whose parameters each take one value.
public enum HTTPQueryProblem: Sendable, Equatable {
    /// A name given twice (`?environment=Sandbox&environment=Production`), decoded: `HTTPRequest.query` keeps only
    /// the last, and answering for a value the client may not have meant is worse than saying so.
    case repeated(name: String)
    /// A name or value with a malformed escape (`%zz`) or one that decodes to invalid UTF-8.
    case malformed(name: String)

    /// The 400 that names it.
    var problem: ProblemError {
        switch self {
        case .repeated(let name): .badRequest("'\(name)' is given more than once in the query; give it once.", field: name)
        case .malformed(let name): .badRequest("'\(name)' is not percent-encoded correctly in the query.", field: name)
        }
    }
}

/// Refuses a query with a problem (``HTTPQueryProblem``) with a 400 naming it, for routes whose parameters each
/// take one value (as a JSON body giving a name twice is refused). Routes without it read no query, and one that
/// does not decode is ignored there as the rest of their query is.
public struct UniqueQueryNames: HTTPMiddleware {
    /// The middleware; it has no settings.
    public init() {}

    /// Passes the request on unless its query has a problem; then throws the 400 naming it.
    public func handle(_ request: HTTPRequest, _ context: HTTPRequestContext, next: HTTPResponder) throws -> HTTPAnswer {
        if let problem = request.queryProblem { throw problem.problem }
        return next(request, context)
    }
}
