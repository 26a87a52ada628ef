/// Routes under a common prefix that pass through the same middleware: `router.group("/v1", keys)` and,
/// nested, `v1.group("/admin", adminOnly)`, whose routes pass through `keys`, then `adminOnly`.
///
/// The middleware runs only for requests that match one of the group's routes: an unknown path under the
/// prefix is still the router's plain 404.
@Loop
public struct RouterGroup: RouteRegistrar {
    private let router: Router
    private let prefix: String
    private let middleware: [any HTTPMiddleware]

    init(router: Router, prefix: String, middleware: [any HTTPMiddleware]) {
        precondition(prefix.hasPrefix("/") && !prefix.hasSuffix("/"), "group prefix \(prefix) must start and not end with /")
        self.router = router
        self.prefix = prefix
        self.middleware = middleware
    }

    /// A group inside this one: its prefix follows this one's, its middleware runs inside this one's.
    public func group(_ prefix: String, _ middleware: any HTTPMiddleware...) -> RouterGroup {
        RouterGroup(router: router, prefix: self.prefix + prefix, middleware: self.middleware + middleware)
    }

    /// Registers a suspending handler at this group's prefix + `pattern`, behind the group's middleware.
    public func add(_ method: String, _ pattern: String, name: String?, _ handler: @escaping Router.Handler) {
        router.add(method, prefix + pattern, name: name, middleware: middleware, handler: .suspending(handler))
    }

    /// Registers a non-suspending handler at this group's prefix + `pattern`, behind the group's middleware.
    public func add(_ method: String, _ pattern: String, name: String?, _ handler: @escaping Router.ImmediateHandler) {
        router.add(method, prefix + pattern, name: name, middleware: middleware, handler: .immediate(handler))
    }

    /// Registers an answering handler at this group's prefix + `pattern`, behind the group's middleware.
    public func add(_ method: String, _ pattern: String, name: String?, answering handler: @escaping Router.AnsweringHandler) {
        router.add(method, prefix + pattern, name: name, middleware: middleware, handler: .answering(handler))
    }
}

/// Where routes are registered: the router, or a group of it (whose prefix comes before `pattern`).
///
/// A synchronous handler closure (`{ request, context in .text("ok") }`) answers without a task; one that
/// awaits runs in a task on the loop.
@Loop
public protocol RouteRegistrar {
    /// Registers a handler that may suspend for `method` (upper case) and `pattern`.
    func add(_ method: String, _ pattern: String, name: String?, _ handler: @escaping Router.Handler)
    /// Registers a handler that answers without suspending.
    func add(_ method: String, _ pattern: String, name: String?, _ handler: @escaping Router.ImmediateHandler)
    /// Registers a handler that answers without suspending when it can, and otherwise hands back work that does.
    func add(_ method: String, _ pattern: String, name: String?, answering handler: @escaping Router.AnsweringHandler)
}

/// What an `AnsweringHandler` gives back: the response now, or the work that produces it after suspending.
@Loop
public enum HTTPHandlerAnswer {
    /// Answered at once, inside the read callback.
    case now(HTTPResponse)
    /// Answered by `work`, run in a task on the loop; what it throws is answered as a handler's error is.
    case later(_ work: @Loop () async throws -> HTTPResponse)
}

extension RouteRegistrar {
    /// Registers a suspending `GET` handler, which also answers `HEAD`.
    public func get(_ pattern: String, name: String? = nil, _ handler: @escaping Router.Handler) { add("GET", pattern, name: name, handler) }
    /// Registers a synchronous `GET` handler, which also answers `HEAD`; no task unless middleware suspends.
    public func get(_ pattern: String, name: String? = nil, _ handler: @escaping Router.ImmediateHandler) { add("GET", pattern, name: name, handler) }
    /// Registers a suspending `POST` handler.
    public func post(_ pattern: String, name: String? = nil, _ handler: @escaping Router.Handler) { add("POST", pattern, name: name, handler) }
    /// Registers a synchronous `POST` handler; no task unless middleware suspends.
    public func post(_ pattern: String, name: String? = nil, _ handler: @escaping Router.ImmediateHandler) { add("POST", pattern, name: name, handler) }
    /// Registers a suspending `PUT` handler.
    public func put(_ pattern: String, name: String? = nil, _ handler: @escaping Router.Handler) { add("PUT", pattern, name: name, handler) }
    /// Registers a synchronous `PUT` handler; no task unless middleware suspends.
    public func put(_ pattern: String, name: String? = nil, _ handler: @escaping Router.ImmediateHandler) { add("PUT", pattern, name: name, handler) }
    /// Registers a suspending `DELETE` handler.
    public func delete(_ pattern: String, name: String? = nil, _ handler: @escaping Router.Handler) { add("DELETE", pattern, name: name, handler) }
    /// Registers a synchronous `DELETE` handler; no task unless middleware suspends.
    public func delete(_ pattern: String, name: String? = nil, _ handler: @escaping Router.ImmediateHandler) { add("DELETE", pattern, name: name, handler) }
}
