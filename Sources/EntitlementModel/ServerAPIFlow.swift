import Foundation

/// The state machine of one App Store Server API call across Apple's two environments: which to ask, and
/// what the call came to. It performs no I/O: the client carries out each returned `Action` (waiting for the
/// app's rate limit and its own request budget first) and reports the exchange back through `received(_:)`.
///
/// Production is asked first; its "not found" (`4040010`, `4040005`, an order with `status` 1) or 401 is asked
/// again of Sandbox, once. Sandbox's "not found" is final; a 401 from both is a configuration error (from
/// Sandbox alone, after Production said "not found", it is one too). Another refusal without an `errorCode`
/// (a bare 404, a 302) is a configuration error of the request where it came from, and is not asked again of
/// Sandbox: unlike a 401 it is no answer Apple documents for a purchase of the other environment, but a sign
/// of a wrong base URL or a proxy in the way, which Sandbox cannot mend (and its "not found" would hide as an
/// unknown purchase). A 429 finishes the call as `rateLimited` (the caller shares the wait with every other
/// request); retryable answers finish it as `retryLater`. After either, a caller with time left may
/// `resend()` to the environment that could not answer, the flow keeping what it learnt (a fallback made, a
/// key refused). A call about one environment's own data (notification history) is made with
/// `fallsBackToSandbox: false`: it never leaves its first environment. The flow keeps Apple's last error
/// answer (`appleStatus`) for the problem a failed call ends in.
public struct ServerAPIFlow: Sendable {
    /// What the caller must do next.
    public enum Action: Sendable, Hashable {
        /// Send the request to this environment's base URL.
        case send(StoreEnvironment)
        /// The call is over.
        case finish(Result)
    }

    /// What the call came to.
    public enum Result: Sendable, Hashable {
        /// Apple answered 200 from `environment`: the body is the answer.
        case answered(environment: StoreEnvironment)
        /// Neither environment knows the id (or the order).
        case notFound(errorCode: Int?)
        /// Apple refused the key from every environment asked (`.key`), or refused the request with no
        /// `errorCode` to say why (`.request`): the configuration is wrong.
        case configurationError(Refusal, detail: String)
        /// The request is invalid for Apple (an id that cannot exist, for instance).
        case rejected(errorCode: Int?, detail: String)
        /// Apple's rate limit: nothing may be sent before `until` (nil: Apple named no time).
        case rateLimited(until: Date?)
        /// Apple could not answer now; ask again later.
        case retryLater(detail: String)
    }

    /// What a configuration error is about, for the words of the problem a caller answers.
    public enum Refusal: Sendable, Hashable {
        /// The key: a 401 from every environment asked, or Production's 401 and Sandbox's "not found".
        case key
        /// The request: a 3xx or 4xx other than 401 with no `errorCode` (a wrong base URL, a proxy's redirect).
        case request
    }

    private enum State: Sendable {
        case idle
        case awaiting(StoreEnvironment)
        /// Finished for now: `resend()` may ask this environment again.
        case interrupted(StoreEnvironment)
        case finished
    }

    private var state: State = .idle
    private let firstEnvironment: StoreEnvironment
    private let fallsBackToSandbox: Bool
    /// Whether Production's answer sent the call on to Sandbox.
    public private(set) var fellBackToSandbox = false
    /// Whether some environment refused the key (401).
    private var refusedKey = false
    /// Apple's last error answer in this call (`ServerAPIStatus.appleStatus`: its `errorCode`, else its HTTP
    /// status), kept across environments and resends; nil while Apple has answered no error (nothing asked
    /// yet, or only timeouts and broken connections). A call that fails reports it as `apple_status`.
    public private(set) var appleStatus: Int?

    /// A call that first asks `firstEnvironment` (Production, unless the purchase is known to be Sandbox's)
    /// and, unless `fallsBackToSandbox` is false, then Sandbox as described above.
    public init(firstEnvironment: StoreEnvironment = .production, fallsBackToSandbox: Bool = true) {
        self.firstEnvironment = firstEnvironment
        self.fallsBackToSandbox = fallsBackToSandbox
    }

    /// The environment of the request in flight, nil before `start()` and after the call finished.
    public var environment: StoreEnvironment? {
        if case .awaiting(let environment) = state { environment } else { nil }
    }

    /// Begins the call. Calling it twice is a programming error.
    public mutating func start() -> Action {
        guard case .idle = state else { preconditionFailure("ServerAPIFlow.start() called twice") }
        state = .awaiting(firstEnvironment)
        return .send(firstEnvironment)
    }

    /// Asks again the environment whose answer finished the call as `rateLimited` or `retryLater`, once the
    /// caller has waited. Calling it after any other finish is a programming error.
    public mutating func resend() -> Action {
        guard case .interrupted(let environment) = state else {
            preconditionFailure("ServerAPIFlow.resend() called when the call was not interrupted")
        }
        state = .awaiting(environment)
        return .send(environment)
    }

    /// Takes the classified answer of the request in flight (`ServerAPIStatus`). Calling it with no request
    /// in flight is a programming error.
    public mutating func received(_ status: ServerAPIStatus) -> Action {
        guard case .awaiting(let environment) = state else {
            preconditionFailure("ServerAPIFlow.received(_:) called with no request in flight")
        }
        if let answered = status.appleStatus { appleStatus = answered }
        switch status {
        case .ok:
            return finish(.answered(environment: environment))
        case .notFound(let errorCode):
            if let next = fallback(from: environment) { return next }
            return finish(refusedKey
                ? .configurationError(.key, detail: "Production refused the key and Sandbox does not know the id")
                : .notFound(errorCode: errorCode))
        case .unauthorized:
            refusedKey = true
            if let next = fallback(from: environment) { return next }
            return finish(.configurationError(.key, detail: "the App Store Server API refused the key (HTTP 401) in \(environment.rawValue)"))
        case .rateLimited(let until, _):
            state = .interrupted(environment)
            return .finish(.rateLimited(until: until))
        case .retryable(let errorCode, let httpStatus):
            state = .interrupted(environment)
            let answer = errorCode.map { " (errorCode \($0))" } ?? httpStatus.map { " (HTTP \($0))" } ?? ""
            return .finish(.retryLater(detail: "Apple could not answer now" + answer))
        case .rejected(let errorCode?, _):
            return finish(.rejected(errorCode: errorCode, detail: "Apple refused the request (errorCode \(errorCode))"))
        case .rejected(nil, let httpStatus):
            return finish(.configurationError(.request, detail: "the App Store Server API refused the request (HTTP \(httpStatus)) in \(environment.rawValue)"))
        }
    }

    /// Production's negative answer goes on to Sandbox once; nil when there is nowhere left to ask.
    private mutating func fallback(from environment: StoreEnvironment) -> Action? {
        guard fallsBackToSandbox, environment == .production, !fellBackToSandbox else { return nil }
        fellBackToSandbox = true
        state = .awaiting(.sandbox)
        return .send(.sandbox)
    }

    private mutating func finish(_ result: Result) -> Action {
        state = .finished
        return .finish(result)
    }
}
