import ServiceRuntime

/// `/v1`'s gate: a request must carry `Authorization: Bearer <key>` with a configured app or admin key. The
/// caller (scope and key id) becomes the context's identity, and its key id the `actor` of the request's
/// failure logs. Without a valid key: 401 with `WWW-Authenticate: Bearer`, never repeating what was presented.
/// `Authorization` given twice is no valid key either, whatever each says: a proxy reading the other one would
/// not agree with us on who the caller is.
struct KeyAuthentication: HTTPMiddleware {
    let keys: APIKeys

    func handle(_ request: HTTPRequest, _ context: HTTPRequestContext, next: HTTPResponder) throws -> HTTPAnswer {
        guard let entry = keys.entry(authorization: request.headers.sole("Authorization")) else {
            throw Self.unauthorized
        }
        var context = context
        context.identity = entry.caller
        if context.logMetadata.isEmpty {
            context.logMetadata = entry.logMetadata  // shared, not built per request
        } else {
            context.logMetadata += entry.logMetadata
        }
        return next(request, context)
    }

    private static let unauthorized = ProblemError(
        status: 401, detail: "A valid 'Authorization: Bearer <key>' header is required.", extra: ["field": "Authorization"],
        headers: ["WWW-Authenticate": "Bearer"])
}

/// `/v1/admin`'s gate, inside `KeyAuthentication`: an app key gets a 403.
struct AdminScope: HTTPMiddleware {
    func handle(_ request: HTTPRequest, _ context: HTTPRequestContext, next: HTTPResponder) throws -> HTTPAnswer {
        guard try context.caller.scope == .admin else {
            throw ProblemError(status: 403, detail: "This route needs an admin key.")
        }
        return next(request, context)
    }
}

extension HTTPRequestContext {
    /// The caller `KeyAuthentication` let in.
    var caller: Caller {
        get throws { try identity(as: Caller.self) }
    }
}
