/// What the server knows about a request beyond its bytes, carried through the middleware to the handler:
/// the request id, the matched route, its path parameters, the identity an authenticating middleware
/// established, and fields for the log lines written about the request.
///
/// A value: a middleware that adds to it passes its own copy on (`var context = context; context.identity
/// = caller; return next(request, context)`), so what it adds is seen by the middleware and handler inside
/// it, never by those outside.
public struct HTTPRequestContext: Sendable {
    /// The request's id (see `HTTPRequest.Fields.requestID`); every log line about the request carries it.
    public let requestID: String
    /// The pattern of the matched route (`/v1/users/{user_id}/entitlements`), `Router.unmatchedRoute` when
    /// none matched: the request's label in metrics and logs.
    public let route: String
    /// The values of the route's `{name}` segments, percent-decoded.
    public let parameters: HTTPPathParameters
    /// Who is calling, as an authenticating middleware established it; nil until one does. The runtime
    /// never looks inside: the service puts its own type here and reads it back with `identity(as:)`.
    public var identity: (any Sendable)?
    /// Fields added to the log lines the runtime writes about this request's failure (`handler_failed`,
    /// and those of errors that log themselves), after the request id and route; e.g. the caller's key id.
    public var logMetadata: [(key: String, value: String)] = []

    init(requestID: String, route: String, parameters: HTTPPathParameters = HTTPPathParameters()) {
        self.requestID = requestID
        self.route = route
        self.parameters = parameters
    }

    /// The identity an authenticating middleware stored, as `type`. Throws (a 500, logged) when there is
    /// none or it is of another type: the route was registered outside the middleware that sets it.
    public func identity<Identity>(as type: Identity.Type) throws -> Identity {
        guard let identity = identity as? Identity else { throw MissingIdentity(route: route, expected: "\(type)") }
        return identity
    }

    /// A handler asked for an identity its route's middleware never set: a programming error, answered 500.
    struct MissingIdentity: Error, CustomStringConvertible {
        var route: String
        var expected: String
        var description: String { "no \(expected) identity on route \(route): it is not behind the middleware that sets one" }
    }
}
