/// Maps method and path to a route's middleware and handler.
///
/// Patterns are literal segments and whole-segment parameters, e.g. `/v1/users/{user_id}/entitlements`; a
/// parameter matches one non-empty segment and reaches the handler percent-decoded in
/// `context.parameters`. Where several patterns match, the one with a literal segment earliest wins
/// (`/v1/admin/products` before `/v1/admin/{x}`). An unknown path is a 404 problem; a known path with another
/// method a 405 with `Allow`; a parameter that is not valid percent-encoded UTF-8 a 400 naming it. These
/// answers run no middleware. `HEAD` falls back to the `GET` handler (the body is left out on the wire). The
/// pattern is the route's label in metrics and logs.
///
/// Routes are registered on the router or on a group (`router.group("/v1", middleware…)`), whose prefix and
/// middleware they take. A handler that never suspends (a synchronous closure) behind middleware that does
/// not suspend either is answered inside the read callback that completed its request; one that may suspend
/// runs in a task on the loop.
@Loop
public final class Router: RouteRegistrar {
    /// A handler that may suspend (database, App Store): it runs in its own task.
    public typealias Handler = @Loop (HTTPRequest, HTTPRequestContext) async throws -> HTTPResponse
    /// A handler that answers without suspending: it runs at once, with no task.
    public typealias ImmediateHandler = @Loop (HTTPRequest, HTTPRequestContext) throws -> HTTPResponse
    /// A handler that answers at once when it can (a cache hit, with no task) and otherwise hands back the
    /// work that suspends, which runs in a task.
    public typealias AnsweringHandler = @Loop (HTTPRequest, HTTPRequestContext) throws -> HTTPHandlerAnswer

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

    private struct Entry {
        var route: Route
        var segments: [Segment]
        var chain: RouteChain
    }

    /// The outcome of looking a request up.
    enum Match {
        /// The index of the matching entry.
        case found(Int, parameters: HTTPPathParameters)
        case methodNotAllowed(route: String, allow: [String])
        case badParameter(route: String, name: String)
        case notFound
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

    /// A group of routes under `prefix` (`/v1`) whose requests pass through `middleware`, outermost first.
    public func group(_ prefix: String, _ middleware: any HTTPMiddleware...) -> RouterGroup {
        RouterGroup(router: self, prefix: prefix, middleware: middleware)
    }

    public func add(_ method: String, _ pattern: String, name: String?, _ handler: @escaping Handler) {
        add(method, pattern, name: name, middleware: [], handler: .suspending(handler))
    }

    public func add(_ method: String, _ pattern: String, name: String?, _ handler: @escaping ImmediateHandler) {
        add(method, pattern, name: name, middleware: [], handler: .immediate(handler))
    }

    public func add(_ method: String, _ pattern: String, name: String?, answering handler: @escaping AnsweringHandler) {
        add(method, pattern, name: name, middleware: [], handler: .answering(handler))
    }

    /// Registers `handler` behind `middleware` for `method` (upper case) and `pattern`. A malformed pattern
    /// or a duplicate registration is a programming error and traps.
    func add(_ method: String, _ pattern: String, name: String?, middleware: [any HTTPMiddleware], handler: RouteChain.Handler) {
        let segments = Self.segments(of: pattern)
        precondition(!entries.contains { $0.route.method == method && Self.sameShape($0.segments, segments) },
                     "route \(method) \(pattern) registered twice")
        if segments.allSatisfy({ if case .literal = $0 { true } else { false } }) {
            literalEntries[pattern, default: [:]][method] = entries.count
        }
        entries.append(Entry(route: Route(method: method, pattern: pattern, name: name), segments: segments,
                             chain: RouteChain(middleware: middleware, handler: handler)))
    }

    /// Answers `request`: a routing problem, or what the matched route's chain answers (ready when nothing in
    /// it suspends), with the route's label.
    func respond(to request: HTTPRequest) -> (answer: HTTPAnswer, route: String) {
        switch match(method: request.method, path: request.path) {
        case .notFound:
            return (.response(Self.notFound), Self.unmatchedRoute)
        case .methodNotAllowed(let route, let allow):
            var response = ProblemError(status: 405, detail: "The path does not support the \(request.method) method.").response
            response.headers.add("Allow", allow.joined(separator: ", "))
            return (.response(response), route)
        case .badParameter(let route, let name):
            let problem = ProblemError.badRequest("The path segment '\(name)' is not valid percent-encoded UTF-8.", field: name)
            return (.response(problem.response), route)
        case .found(let index, let parameters):
            let route = entries[index].route.pattern  // not the whole entry: each of its fields would be retained
            let context = HTTPRequestContext(requestID: request.requestID, route: route, parameters: parameters)
            return (entries[index].chain.respond(request, context), route)
        }
    }

    /// Finds the route for `method` and raw `path`.
    func match(method: String, path: String) -> Match {
        if let byMethod = literalEntries[path], let index = byMethod[method] ?? (method == "HEAD" ? byMethod["GET"] : nil) {
            return .found(index, parameters: HTTPPathParameters())  // all literal: nothing can be more specific
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
        var parameters: [(name: String, value: String)] = []
        for (segment, part) in zip(entry.segments, parts) {
            guard case .parameter(let name) = segment else { continue }
            guard let value = PercentDecoding.decode(part) else { return .badParameter(route: entry.route.pattern, name: name) }
            parameters.append((name, value))
        }
        return .found(index, parameters: HTTPPathParameters(parameters))
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
