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
        /// The method as registered, upper case (`GET`); a `GET` route also answers `HEAD`.
        public var method: String
        /// The full pattern, group prefix included; the route's label in metrics and logs.
        public var pattern: String
        /// The name given at registration; nil when none. Routing ignores it.
        public var name: String?
    }

    private enum Segment {
        /// A literal segment's UTF-8 bytes.
        case literal([UInt8])
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
    /// Indices of the entries with a parameter, by their number of segments: a path is matched only against
    /// patterns as long as itself.
    private var parameterEntries: [[Int]] = []

    /// A router with no routes: every path is a 404 until routes are added.
    public init() {}

    /// Every route, in registration order.
    public var routes: [Route] { entries.map(\.route) }

    /// A group of routes under `prefix` (`/v1`) whose requests pass through `middleware`, outermost first.
    public func group(_ prefix: String, _ middleware: any HTTPMiddleware...) -> RouterGroup {
        RouterGroup(router: self, prefix: prefix, middleware: middleware)
    }

    /// Registers a suspending handler with no middleware; a malformed pattern or a duplicate traps.
    public func add(_ method: String, _ pattern: String, name: String?, _ handler: @escaping Handler) {
        add(method, pattern, name: name, middleware: [], handler: .suspending(handler))
    }

    /// Registers a non-suspending handler with no middleware; a malformed pattern or a duplicate traps.
    public func add(_ method: String, _ pattern: String, name: String?, _ handler: @escaping ImmediateHandler) {
        add(method, pattern, name: name, middleware: [], handler: .immediate(handler))
    }

    /// Registers an answering handler with no middleware; a malformed pattern or a duplicate traps.
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
        } else {
            while parameterEntries.count <= segments.count { parameterEntries.append([]) }
            parameterEntries[segments.count].append(entries.count)
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
        return Self.match(method: method, path: path, entries, parameterEntries)
    }

    /// Finds the route with a parameter for `method` and raw `path`, comparing bytes (`Substring`'s views are
    /// slow). Outside the actor's isolation, as the helpers it calls: a closure formed in `@Loop` code checks
    /// the executor when run.
    nonisolated private static func match(method: String, path: String, _ entries: [Entry], _ parameterEntries: [[Int]]) -> Match {
        var path = path
        return path.withUTF8 { match(method: method, path: $0, entries, parameterEntries) }
    }

    nonisolated private static func match(method: String, path bytes: UnsafeBufferPointer<UInt8>, _ entries: [Entry],
                                          _ parameterEntries: [[Int]]) -> Match {
        // The segments' ranges in a temporary buffer (on the stack for any sane path), not an array per request.
        let count = bytes.reduce(1) { $1 == UInt8(ascii: "/") ? $0 + 1 : $0 }
        return withUnsafeTemporaryAllocation(of: Range<Int>.self, capacity: count) { buffer in
            split(bytes, into: buffer)
            return match(method: method, path: bytes, parts: UnsafeBufferPointer(buffer), entries, parameterEntries)
        }
    }

    nonisolated private static func match(method: String, path bytes: UnsafeBufferPointer<UInt8>, parts: UnsafeBufferPointer<Range<Int>>,
                                          _ entries: [Entry], _ parameterEntries: [[Int]]) -> Match {
        // An all-literal pattern that matches is the path itself, found above for the method when it has one.
        let candidates = parts.count < parameterEntries.count ? parameterEntries[parts.count] : []
        // Through a buffer: its elements are read in place, where the array's would be copied (each field retained).
        let best = entries.withUnsafeBufferPointer { Self.best(in: $0, candidates, method: method, bytes, parts) }
        guard let index = best else {
            let pathMatches = entries.filter { Self.matches($0.segments, bytes, parts) }
            guard let first = pathMatches.first else { return .notFound }
            var allow = Set(pathMatches.map(\.route.method))
            if allow.contains("GET") { allow.insert("HEAD") }
            return .methodNotAllowed(route: first.route.pattern, allow: allow.sorted())
        }
        var parameters = HTTPPathParameters()
        for (segment, part) in zip(entries[index].segments, parts) {
            guard case .parameter(let name) = segment else { continue }
            let text = String(decoding: UnsafeBufferPointer(rebasing: bytes[part]), as: UTF8.self)  // whole characters of a String
            guard let value = PercentDecoding.decode(text) else { return .badParameter(route: entries[index].route.pattern, name: name) }
            parameters.append(name, value)
        }
        return .found(index, parameters: parameters)
    }

    /// The index of the most specific of `candidates` whose pattern matches the path (`bytes` split into
    /// `parts`) for `method` (`HEAD` falling back to `GET`).
    nonisolated private static func best(in entries: UnsafeBufferPointer<Entry>, _ candidates: [Int], method: String,
                             _ bytes: UnsafeBufferPointer<UInt8>, _ parts: UnsafeBufferPointer<Range<Int>>) -> Int? {
        var best: Int?
        var bestForGet: Int?
        for index in candidates where matches(entries[index].segments, bytes, parts) {
            if entries[index].route.method == method && improves(entries, index, on: best) { best = index }
            if entries[index].route.method == "GET" && improves(entries, index, on: bestForGet) { bestForGet = index }
        }
        return best == nil && method == "HEAD" ? bestForGet : best
    }

    /// True when the entry at `index` should replace the best match so far.
    nonisolated private static func improves(_ entries: UnsafeBufferPointer<Entry>, _ index: Int, on current: Int?) -> Bool {
        guard let current else { return true }
        return isMoreSpecific(entries[index].segments, than: entries[current].segments)
    }

    /// Fills `parts` with the ranges of the `/`-separated segments of `bytes`, empty ones included: one more
    /// than the slashes, which is `parts.count`.
    nonisolated private static func split(_ bytes: UnsafeBufferPointer<UInt8>, into parts: UnsafeMutableBufferPointer<Range<Int>>) {
        var part = 0
        var start = 0
        for index in bytes.indices where bytes[index] == UInt8(ascii: "/") {
            parts.initializeElement(at: part, to: start..<index)
            part += 1
            start = index + 1
        }
        parts.initializeElement(at: part, to: start..<bytes.count)
    }

    nonisolated private static func matches(_ segments: [Segment], _ bytes: UnsafeBufferPointer<UInt8>,
                                            _ parts: UnsafeBufferPointer<Range<Int>>) -> Bool {
        guard segments.count == parts.count else { return false }
        for (segment, part) in zip(segments, parts) {
            switch segment {
            case .literal(let literal):
                if literal.count != part.count || !literal.withUnsafeBufferPointer({ $0.elementsEqual(bytes[part]) }) { return false }
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
    nonisolated private static func isMoreSpecific(_ a: [Segment], than b: [Segment]) -> Bool {
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
            return .literal(Array(part.utf8))
        }
    }
}
