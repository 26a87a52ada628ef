import ServiceRuntime

/// Middleware on the routes that may change data (`POST`, `PUT`, `DELETE`): after the handler and before the
/// answer leaves, it waits for `EntitlementCache.barrier()`, so a client that got the answer of its change
/// reads that change on this instance at once. Reads pass straight through, with no task, and so do refusals
/// (4xx: a refused request changed nothing); a 5xx may have failed after its commit, so it waits too.
struct ChangeBarrier: HTTPMiddleware {
    let cache: EntitlementCache

    func handle(_ request: HTTPRequest, _ context: HTTPRequestContext, next: HTTPResponder) throws -> HTTPAnswer {
        guard Self.mutates(request.method) else { return next(request, context) }
        let answer = next(request, context)
        let cache = self.cache
        return .pending {
            let outcome = await answer.outcome
            if case .success(let response) = outcome, (400..<500).contains(response.status) { return outcome }
            await cache.barrier()
            return outcome
        }
    }

    /// Whether requests of `method` may change data.
    static func mutates(_ method: String) -> Bool {
        method == "POST" || method == "PUT" || method == "DELETE" || method == "PATCH"
    }
}
