/// Maps method and path to a handler.
///
/// Patterns are literal segments and whole-segment parameters, e.g. `/v1/users/{user_id}/entitlements`; a
/// parameter matches one non-empty segment and reaches the handler percent-decoded in `pathParameters`.
/// Where several patterns match, the one with a literal segment earliest wins (`/v1/admin/products` before
/// `/v1/admin/{x}`). An unknown path is a 404 problem; a known path with another method a 405 with `Allow`.
/// `HEAD` falls back to the `GET` handler (the body is left out on the wire). The pattern is the route's
/// label in metrics and logs.
@Loop
public final class Router {
    public typealias Handler = @Loop (HTTPRequest) async throws -> HTTPResponse

    /// A registered route, for listing (documentation, diagnostics).
    public struct Route: Sendable, Equatable {
        public var method: String
        public var pattern: String
        public var name: String?
    }

    private enum Segment: Equatable {
        case literal(Substring)
        case parameter(String)
    }

    private struct Entry {
        var route: Route
        var segments: [Segment]
        var handler: Handler
    }

    /// The outcome of looking a request up.
    enum Match {
        case found(route: String, handler: Handler, parameters: [String: String])
        case methodNotAllowed(route: String, allow: [String])
        case badParameter(route: String, name: String)
        case notFound
    }

    /// The metrics and log label of requests no route matched.
    public static let unmatchedRoute = "unmatched"

    private var entries: [Entry] = []

    public init() {}

    /// Every route, in registration order.
    public var routes: [Route] { entries.map(\.route) }

    /// Registers `handler` for `method` (upper case) and `pattern`. A malformed pattern or a duplicate
    /// registration is a programming error and traps.
    public func add(_ method: String, _ pattern: String, name: String? = nil, _ handler: @escaping Handler) {
        let segments = Self.segments(of: pattern)
        precondition(!entries.contains { $0.route.method == method && $0.segments == segments },
                     "route \(method) \(pattern) registered twice")
        entries.append(Entry(route: Route(method: method, pattern: pattern, name: name), segments: segments, handler: handler))
    }

    public func get(_ pattern: String, name: String? = nil, _ handler: @escaping Handler) { add("GET", pattern, name: name, handler) }
    public func post(_ pattern: String, name: String? = nil, _ handler: @escaping Handler) { add("POST", pattern, name: name, handler) }
    public func put(_ pattern: String, name: String? = nil, _ handler: @escaping Handler) { add("PUT", pattern, name: name, handler) }
    public func delete(_ pattern: String, name: String? = nil, _ handler: @escaping Handler) { add("DELETE", pattern, name: name, handler) }

    /// Runs the matching handler and turns whatever it throws into a problem response. Returns the response
    /// and the route label.
    func respond(to request: HTTPRequest) async -> (response: HTTPResponse, route: String) {
        switch match(method: request.method, path: request.path) {
        case .notFound:
            return (ProblemError(status: 404, detail: "No route matches the request path.").response, Self.unmatchedRoute)
        case .methodNotAllowed(let route, let allow):
            var response = ProblemError(status: 405, detail: "The path does not support the \(request.method) method.").response
            response.headers.add("Allow", allow.joined(separator: ", "))
            return (response, route)
        case .badParameter(let route, let name):
            return (ProblemError.badRequest("The path segment '\(name)' is not valid percent-encoded UTF-8.", field: name).response, route)
        case .found(let route, let handler, let parameters):
            var request = request
            request.pathParameters = parameters
            do {
                return (try await handler(request), route)
            } catch let problem as ProblemError {
                return (problem.response, route)
            } catch {
                Log.error("handler_failed", ["request_id": request.requestID, "route": route, "error": String(describing: error)])
                return (ProblemError(status: 500, detail: "The server failed to handle the request.").response, route)
            }
        }
    }

    /// Finds the route for `method` and raw `path`.
    func match(method: String, path: String) -> Match {
        let parts = path.split(separator: "/", omittingEmptySubsequences: false)
        var best: Entry?
        var bestForGet: Entry?
        var pathMatches: [Entry] = []
        for entry in entries where Self.matches(entry.segments, parts) {
            pathMatches.append(entry)
            if entry.route.method == method, best.map({ Self.isMoreSpecific(entry.segments, than: $0.segments) }) ?? true {
                best = entry
            }
            if entry.route.method == "GET", bestForGet.map({ Self.isMoreSpecific(entry.segments, than: $0.segments) }) ?? true {
                bestForGet = entry
            }
        }
        if best == nil && method == "HEAD" { best = bestForGet }
        guard let entry = best else {
            guard let first = pathMatches.first else { return .notFound }
            var allow = Set(pathMatches.map(\.route.method))
            if allow.contains("GET") { allow.insert("HEAD") }
            return .methodNotAllowed(route: first.route.pattern, allow: allow.sorted())
        }
        var parameters: [String: String] = [:]
        for (segment, part) in zip(entry.segments, parts) {
            guard case .parameter(let name) = segment else { continue }
            guard let value = PercentDecoding.decode(part) else { return .badParameter(route: entry.route.pattern, name: name) }
            parameters[name] = value
        }
        return .found(route: entry.route.pattern, handler: entry.handler, parameters: parameters)
    }

    private static func matches(_ segments: [Segment], _ parts: [Substring]) -> Bool {
        guard segments.count == parts.count else { return false }
        for (segment, part) in zip(segments, parts) {
            switch segment {
            case .literal(let literal): if literal != part { return false }
            case .parameter: if part.isEmpty { return false }
            }
        }
        return true
    }

    /// True when `a` has a literal segment where `b` first has a parameter.
    private static func isMoreSpecific(_ a: [Segment], than b: [Segment]) -> Bool {
        for (x, y) in zip(a, b) {
            switch (x, y) {
            case (.literal, .parameter): return true
            case (.parameter, .literal): return false
            default: continue
            }
        }
        return false
    }

    private static func segments(of pattern: String) -> [Segment] {
        precondition(pattern.hasPrefix("/"), "route pattern \(pattern) must start with /")
        return pattern.split(separator: "/", omittingEmptySubsequences: false).map { part in
            if part.hasPrefix("{") && part.hasSuffix("}") && part.count > 2 {
                return .parameter(String(part.dropFirst().dropLast()))
            }
            precondition(!part.contains("{") && !part.contains("}"), "route pattern \(pattern): parameters must be whole segments")
            return .literal(part)
        }
    }
}
