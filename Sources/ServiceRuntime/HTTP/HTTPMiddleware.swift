/// Code that runs around the handlers of a route group (`router.group("/v1", middleware…)`): it may answer
/// instead of the handler (throwing an `HTTPResponseError`, such as a 401 problem), pass a changed request or
/// context on to `next`, and change what comes back.
///
/// ```swift
/// struct NoStore: HTTPMiddleware {
///     func handle(_ request: HTTPRequest, _ context: HTTPRequestContext, next: HTTPResponder) throws -> HTTPAnswer {
///         next(request, context).map { response in
///             var response = response
///             response.headers.set("Cache-Control", "no-store")
///             return response
///         }
///     }
/// }
/// ```
///
/// `handle` itself never suspends, so a route whose handler never suspends is answered inside the read
/// callback, with no task: what comes back from `next` is an `HTTPAnswer` that is either ready or pending,
/// and `map` works on both. A middleware that must wait (a lookup) returns `.pending { … await next(…).outcome }`.
/// What `next` gives back is always a response or an abort: errors thrown inside have already been turned
/// into their responses, so a middleware sees the 404 or 500 its handler ended with.
@Loop
public protocol HTTPMiddleware {
    func handle(_ request: HTTPRequest, _ context: HTTPRequestContext, next: HTTPResponder) throws -> HTTPAnswer
}

/// What a request comes to: a response, or the connection aborted without one (`HTTPConnectionAbort`).
public typealias HTTPOutcome = Result<HTTPResponse, HTTPConnectionAbort>

/// What a route's chain of middleware and handler answers: the outcome now, or work that suspends first.
@Loop
public enum HTTPAnswer {
    /// Known without suspending.
    case ready(HTTPOutcome)
    /// Produced by suspending work, run in a task on the loop.
    case pending(@Loop () async -> HTTPOutcome)

    /// `response`, ready.
    public static func response(_ response: HTTPResponse) -> HTTPAnswer {
        .ready(.success(response))
    }

    /// The outcome, waiting for it when it is pending.
    public var outcome: HTTPOutcome {
        get async {
            switch self {
            case .ready(let outcome): outcome
            case .pending(let work): await work()
            }
        }
    }

    /// The ready response, moved out; nil when the answer is pending or an abort. `self` is left holding an
    /// empty response, so the caller has the only reference to the one returned: changing it (a header
    /// field) writes in place instead of copying its storage.
    public mutating func takeReadyResponse() -> HTTPResponse? {
        guard case .ready(.success(let response)) = self else { return nil }
        self = .ready(.success(HTTPResponse()))
        return response
    }

    /// The same answer with `transform` applied to its response (an abort stays an abort): at once when it
    /// is ready, when it comes when it is pending.
    public func map(_ transform: @escaping @Loop (HTTPResponse) -> HTTPResponse) -> HTTPAnswer {
        switch self {
        case .ready(.success(let response)):
            .ready(.success(transform(response)))
        case .ready(.failure):
            self
        case .pending(let work):
            .pending {
                switch await work() {
                case .success(let response): .success(transform(response))
                case .failure(let abort): .failure(abort)
                }
            }
        }
    }
}

/// The rest of a route's chain, as a middleware sees it: call it to run the next middleware or the handler.
@Loop
public struct HTTPResponder {
    private let chain: RouteChain
    private let level: Int

    init(_ chain: RouteChain, level: Int) {
        self.chain = chain
        self.level = level
    }

    /// Runs the next middleware, or the handler after the last; never throws: errors come back as their responses.
    public func callAsFunction(_ request: HTTPRequest, _ context: HTTPRequestContext) -> HTTPAnswer {
        chain.respond(request, context, from: level)
    }
}

/// One route's middleware, outermost first, and its handler.
@Loop
final class RouteChain {
    enum Handler {
        case immediate(Router.ImmediateHandler)
        case suspending(Router.Handler)
        case answering(Router.AnsweringHandler)
    }

    let middleware: [any HTTPMiddleware]
    let handler: Handler

    init(middleware: [any HTTPMiddleware], handler: Handler) {
        self.middleware = middleware
        self.handler = handler
    }

    /// Runs the chain from middleware `level` (the handler when past the last one). Whatever is thrown is
    /// answered where it is thrown, with the context of the code that threw it.
    func respond(_ request: HTTPRequest, _ context: HTTPRequestContext, from level: Int = 0) -> HTTPAnswer {
        do {
            if level < middleware.count {
                return try middleware[level].handle(request, context, next: HTTPResponder(self, level: level + 1))
            }
            switch handler {
            case .immediate(let handler):
                return .response(try handler(request, context))
            case .suspending(let handler):
                return Self.pending(context) { try await handler(request, context) }
            case .answering(let handler):
                switch try handler(request, context) {
                case .now(let response): return .response(response)
                case .later(let work): return Self.pending(context, work)
                }
            }
        } catch {
            return .ready(HTTPErrorAnswer.outcome(of: error, context))
        }
    }

    /// `work` to run in a task, what it throws answered with `context`.
    private static func pending(_ context: HTTPRequestContext, _ work: @escaping @Loop () async throws -> HTTPResponse) -> HTTPAnswer {
        .pending {
            do {
                return .success(try await work())
            } catch {
                return HTTPErrorAnswer.outcome(of: error, context)
            }
        }
    }
}
