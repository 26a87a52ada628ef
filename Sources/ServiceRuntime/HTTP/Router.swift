/// Maps method and path to a handler.
///
/// Patterns are literal segments and whole-segment parameters, e.g. `/v1/users/{user_id}/entitlements`; a
/// parameter matches one non-empty segment and reaches the handler percent-decoded in `pathParameters`.
/// Where several patterns match, the one with a literal segment earliest wins (`/v1/admin/products` before
/// `/v1/admin/{x}`). An unknown path is a 404 problem; a known path with another method a 405 with `Allow`.
/// `HEAD` falls back to the `GET` handler (the body is left out on the wire). The pattern is the route's
/// label in metrics and logs.
///
/// A handler that never suspends (a synchronous closure) is answered inside the read callback that
/// completed its request; one that may suspend runs in a task on the loop.
@Loop
public final class Router {
    /// A handler that may suspend (database, App Store): it runs in its own task.
    public typealias Handler = @Loop (HTTPRequest) async throws -> HTTPResponse
    /// A handler that answers without suspending: it runs at once, with no task.
    public typealias ImmediateHandler = @Loop (HTTPRequest) throws -> HTTPResponse

    /// A registered route, for listing (documentation, diagnostics).
    public struct Route: Sendable, Equatable {
        public var method: String
        public var pattern: String
        public var name: String?
    }

    private enum Segment {
        case literal(Substring)
        case parameter(String)
    }

    private enum Body {
        case immediate(ImmediateHandler)
        case suspending(Handler)
    }

    private struct Entry {
        var route: Route
        var segments: [Segment]
        var body: Body
    }

    /// The outcome of looking a request up.
    enum Match {
        /// The index of the matching entry.
        case found(Int, parameters: [String: String])
        case methodNotAllowed(route: String, allow: [String])
        case badParameter(route: String, name: String)
        case notFound
    }

    /// What to do with a request: its answer is known already, or a suspending handler must run.
    enum Dispatch {
        case answered(HTTPResponse, route: String)
        case suspending(Handler, HTTPRequest, route: String)
    }

    /// The answer to every path no route matches, made once.
    private static let notFound = ProblemError(status: 404, detail: "No route matches the request path.").response

    /// The metrics and log label of requests no route matched.
    public static let unmatchedRoute = "unmatched"

    private var entries: [Entry] = []
    /// Entries without parameters by path, then method: the common lookup needs no splitting or scanning.
    private var literalEntries: [String: [String: Int]] = [:]

    public init() {}

    /// Every route, in registration order.
    public var routes: [Route] { entries.map(\.route) }

    /// Registers `handler` for `method` (upper case) and `pattern`. A malformed pattern or a duplicate
    /// registration is a programming error and traps.
    public func add(_ method: String, _ pattern: String, name: String? = nil, _ handler: @escaping Handler) {
        add(method, pattern, name: name, body: .suspending(handler))
    }

    /// Registers a handler that answers without suspending.
    public func add(_ method: String, _ pattern: String, name: String? = nil, _ handler: @escaping ImmediateHandler) {
        add(method, pattern, name: name, body: .immediate(handler))
    }

    private func add(_ method: String, _ pattern: String, name: String?, body: Body) {
        let segments = Self.segments(of: pattern)
        precondition(!entries.contains { $0.route.method == method && Self.sameShape($0.segments, segments) },
                     "route \(method) \(pattern) registered twice")
        if segments.allSatisfy({ if case .literal = $0 { true } else { false } }) {
            literalEntries[pattern, default: [:]][method] = entries.count
        }
        entries.append(Entry(route: Route(method: method, pattern: pattern, name: name), segments: segments, body: body))
    }

    public func get(_ pattern: String, name: String? = nil, _ handler: @escaping Handler) { add("GET", pattern, name: name, handler) }
    public func get(_ pattern: String, name: String? = nil, _ handler: @escaping ImmediateHandler) { add("GET", pattern, name: name, handler) }
    public func post(_ pattern: String, name: String? = nil, _ handler: @escaping Handler) { add("POST", pattern, name: name, handler) }
    public func post(_ pattern: String, name: String? = nil, _ handler: @escaping ImmediateHandler) { add("POST", pattern, name: name, handler) }
    public func put(_ pattern: String, name: String? = nil, _ handler: @escaping Handler) { add("PUT", pattern, name: name, handler) }
    public func put(_ pattern: String, name: String? = nil, _ handler: @escaping ImmediateHandler) { add("PUT", pattern, name: name, handler) }
    public func delete(_ pattern: String, name: String? = nil, _ handler: @escaping Handler) { add("DELETE", pattern, name: name, handler) }
    public func delete(_ pattern: String, name: String? = nil, _ handler: @escaping ImmediateHandler) { add("DELETE", pattern, name: name, handler) }

    /// Answers `request`: a routing problem or an immediate handler's answer now, else the suspending
    /// handler to run (with the path parameters set on the request it receives).
    func dispatch(_ request: HTTPRequest) -> Dispatch {
        switch match(method: request.method, path: request.path) {
        case .notFound:
            return .answered(Self.notFound, route: Self.unmatchedRoute)
        case .methodNotAllowed(let route, let allow):
            var response = ProblemError(status: 405, detail: "The path does not support the \(request.method) method.").response
            response.headers.add("Allow", allow.joined(separator: ", "))
            return .answered(response, route: route)
        case .badParameter(let route, let name):
            return .answered(ProblemError.badRequest("The path segment '\(name)' is not valid percent-encoded UTF-8.", field: name).response, route: route)
        case .found(let index, let parameters):
            let entry = entries[index]
            var request = request
            if !parameters.isEmpty { request.pathParameters = parameters }
            switch entry.body {
            case .immediate(let handler):
                do {
                    return .answered(try handler(request), route: entry.route.pattern)
                } catch {
                    return .answered(Self.answer(to: error, request, route: entry.route.pattern), route: entry.route.pattern)
                }
            case .suspending(let handler):
                return .suspending(handler, request, route: entry.route.pattern)
            }
        }
    }

    /// Runs a suspending handler and turns whatever it throws into a problem response.
    static func run(_ handler: Handler, _ request: HTTPRequest, route: String) async -> HTTPResponse {
        do {
            return try await handler(request)
        } catch {
            return answer(to: error, request, route: route)
        }
    }

    /// A thrown `ProblemError` as its own response; a database that does not answer as 503; anything else
    /// logged and answered 500.
    private static func answer(to error: any Error, _ request: HTTPRequest, route: String) -> HTTPResponse {
        if let problem = error as? ProblemError { return problem.response }
        if let database = error as? PostgresError, database.isUnavailable {
            Log.warning("database_unavailable", ["request_id": request.requestID, "route": route, "error": database.description])
            return ProblemError(status: 503, detail: "The database does not answer; try again later.").response
        }
        Log.error("handler_failed", ["request_id": request.requestID, "route": route, "error": String(describing: error)])
        return ProblemError(status: 500, detail: "The server failed to handle the request.").response
    }

    /// Finds the route for `method` and raw `path`.
    func match(method: String, path: String) -> Match {
        if let byMethod = literalEntries[path], let index = byMethod[method] ?? (method == "HEAD" ? byMethod["GET"] : nil) {
            return .found(index, parameters: [:])  // all literal: nothing can be more specific
        }
        let parts = Self.split(path)
        var best: Int?
        var bestForGet: Int?
        for index in entries.indices where Self.matches(entries[index].segments, parts) {
            if entries[index].route.method == method && improves(index, on: best) { best = index }
            if entries[index].route.method == "GET" && improves(index, on: bestForGet) { bestForGet = index }
        }
        if best == nil && method == "HEAD" { best = bestForGet }
        guard let index = best else {
            let pathMatches = entries.filter { Self.matches($0.segments, parts) }
            guard let first = pathMatches.first else { return .notFound }
            var allow = Set(pathMatches.map(\.route.method))
            if allow.contains("GET") { allow.insert("HEAD") }
            return .methodNotAllowed(route: first.route.pattern, allow: allow.sorted())
        }
        let entry = entries[index]
        var parameters: [String: String] = [:]
        for (segment, part) in zip(entry.segments, parts) {
            guard case .parameter(let name) = segment else { continue }
            guard let value = PercentDecoding.decode(part) else { return .badParameter(route: entry.route.pattern, name: name) }
            parameters[name] = value
        }
        return .found(index, parameters: parameters)
    }

    /// True when the entry at `index` should replace the best match so far.
    private func improves(_ index: Int, on current: Int?) -> Bool {
        guard let current else { return true }
        return Self.isMoreSpecific(entries[index].segments, than: entries[current].segments)
    }

    /// The `/`-separated segments of `path`, empty ones included.
    private static func split(_ path: String) -> [Substring] {
        var parts: [Substring] = []
        parts.reserveCapacity(8)
        var start = path.startIndex
        var index = path.utf8.startIndex
        while index != path.utf8.endIndex {
            if path.utf8[index] == UInt8(ascii: "/") {
                parts.append(path[start..<index])
                start = path.utf8.index(after: index)
            }
            index = path.utf8.index(after: index)
        }
        parts.append(path[start...])
        return parts
    }

    private static func matches(_ segments: [Segment], _ parts: [Substring]) -> Bool {
        guard segments.count == parts.count else { return false }
        for (segment, part) in zip(segments, parts) {
            switch segment {
            case .literal(let literal): if !literal.utf8.elementsEqual(part.utf8) { return false }
            case .parameter: if part.isEmpty { return false }
            }
        }
        return true
    }

    /// True when both patterns match exactly the same paths (parameter names aside).
    private static func sameShape(_ a: [Segment], _ b: [Segment]) -> Bool {
        a.count == b.count && zip(a, b).allSatisfy { x, y in
            switch (x, y) {
            case (.literal(let left), .literal(let right)): left == right
            case (.parameter, .parameter): true
            default: false
            }
        }
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
