/// The state machine of one receipt verification against verifyReceipt: which environment to ask, when to
/// repeat a request at once, and what the verification came to. It performs no I/O: the App Store client
/// carries out each returned `Action` and reports the exchange's `Outcome` back through `received(_:)`.
///
/// `firstEnvironment` (production unless the receipt is known to be sandbox) is asked first; `21007` moves to
/// sandbox and `21008` to production, at most `maxRedirects` times per verification (production, sandbox and
/// production again; a further redirect, or one to the environment that answered, is treated as retryable: Apple
/// contradicts itself only in passing); `21002` is repeated immediately at most `maxImmediateRetries`
/// times, then counts as a rejection. Every other answer finishes the verification, classified by
/// `VerifyStatus`. Retrying later (backoff) is the caller's business: a new flow per attempt.
public struct VerificationFlow: Sendable {
    /// How one exchange with verifyReceipt ended.
    public enum Outcome: Sendable, Hashable {
        /// HTTP 200 with a decodable body.
        case answered(AppStoreResponse)
        /// No decodable HTTP 200 answer.
        case failed(TransportFailure)
    }

    /// What the caller must do next.
    public enum Action: Sendable, Hashable {
        /// Post the receipt to this environment's verifyReceipt endpoint (the first request, or a redirect).
        case send(StoreEnvironment)
        /// Post the same request to the same endpoint again, now (Apple's `21002` can be a passing fault).
        case retrySameEnvironment
        /// The verification is over.
        case finish(Result)
    }

    /// What the verification came to.
    public enum Result: Sendable, Hashable {
        /// Apple answered `0` or `21006`; `environment` is the endpoint that answered.
        case verified(AppStoreResponse, environment: StoreEnvironment)
        /// The receipt is not valid (or belongs to another app, then with no `appleStatus`): grant nothing.
        case rejected(appleStatus: Int?, detail: String)
        /// Apple says our configuration is wrong (`21004`, `21000`), or the endpoint does (an HTTP status other
        /// than 200 that is not 5xx, 408 or 429).
        case configurationError(appleStatus: Int?, detail: String)
        /// Apple could not answer now; try again later.
        case retryLater(appleStatus: Int?, reason: String)
    }

    /// How many times a `21002` answer is repeated at once before the receipt counts as rejected.
    public static let maxImmediateRetries = 2
    /// How many `21007`/`21008` redirects one verification follows.
    public static let maxRedirects = 2
    /// The most requests one verification sends: the first, its redirects and the immediate repeats.
    public static let maxRequests = 1 + maxRedirects + maxImmediateRetries

    private enum State: Sendable {
        case idle
        case awaiting(StoreEnvironment)
        case finished
    }

    private var state: State = .idle
    private let firstEnvironment: StoreEnvironment
    private let expectedBundleID: String?
    /// How many redirects (`21007`/`21008`) were followed so far.
    public private(set) var redirects = 0
    /// How many `21002` answers were repeated so far.
    public private(set) var immediateRetries = 0
    /// Requests sent so far, repeats and redirects included.
    public private(set) var requestsSent = 0
    /// The environment whose endpoint gave the last answer (transport failures are not answers).
    public private(set) var answeringEnvironment: StoreEnvironment?

    /// A verification that first asks `firstEnvironment` (production unless the receipt is known to be from
    /// sandbox). With `expectedBundleID`, a valid receipt of another app is rejected; a receipt that names no
    /// bundle is accepted.
    public init(firstEnvironment: StoreEnvironment = .production, expectedBundleID: String? = nil) {
        self.firstEnvironment = firstEnvironment
        self.expectedBundleID = expectedBundleID
    }

    /// The environment of the request in flight, nil before `start()` and after the verification finished.
    public var environment: StoreEnvironment? {
        if case .awaiting(let environment) = state { environment } else { nil }
    }

    /// Begins the verification. Calling it twice is a programming error.
    public mutating func start() -> Action {
        guard case .idle = state else { preconditionFailure("VerificationFlow.start() called twice") }
        return send(to: firstEnvironment)
    }

    /// Takes the outcome of the request in flight. Calling it with no request in flight is a programming error.
    public mutating func received(_ outcome: Outcome) -> Action {
        guard case .awaiting(let environment) = state else {
            preconditionFailure("VerificationFlow.received(_:) called with no request in flight")
        }
        switch outcome {
        case .failed(let failure):
            return switch VerifyStatus(failure) {
            case .configurationError: finish(.configurationError(appleStatus: nil, detail: failure.description))
            default: finish(.retryLater(appleStatus: nil, reason: failure.description))
            }
        case .answered(let response):
            answeringEnvironment = environment
            return answered(response, by: environment)
        }
    }

    private mutating func answered(_ response: AppStoreResponse, by environment: StoreEnvironment) -> Action {
        let status = response.status
        let detail = "Apple status \(status)" + (response.exception.map { ": \($0)" } ?? "")
        switch VerifyStatus(response) {
        case .ok, .okExpired:
            // Apple always answers an accepted receipt with the receipt it read: an answer without one (a proxy, a
            // wrong endpoint URL) proves nothing and records nothing, so it is asked again rather than taken as final.
            guard response.receipt != nil else {
                return finish(.retryLater(appleStatus: status, reason: "\(detail) from \(environment.rawValue) without a receipt"))
            }
            if let expected = expectedBundleID, let bundleID = response.bundleID, bundleID != expected {
                return finish(.rejected(appleStatus: status, detail: "receipt is for \(bundleID), not \(expected)"))
            }
            return finish(.verified(response, environment: environment))
        case .redirect(let target):
            guard target != environment else {
                return finish(.retryLater(appleStatus: status, reason: "\(detail) from \(environment.rawValue), the environment it names"))
            }
            guard redirects < Self.maxRedirects else {
                return finish(.retryLater(appleStatus: status, reason: "\(detail) from \(environment.rawValue) after \(redirects) redirects"))
            }
            redirects += 1
            return send(to: target)
        case .malformedOrTransient:
            guard immediateRetries < Self.maxImmediateRetries else {
                return finish(.rejected(
                    appleStatus: status, detail: "\(detail) after \(immediateRetries) immediate retries"
                ))
            }
            immediateRetries += 1
            requestsSent += 1
            return .retrySameEnvironment
        case .rejected:
            return finish(.rejected(appleStatus: status, detail: detail))
        case .configurationError:
            return finish(.configurationError(appleStatus: status, detail: detail))
        case .retryable:
            return finish(.retryLater(appleStatus: status, reason: detail))
        }
    }

    private mutating func send(to environment: StoreEnvironment) -> Action {
        state = .awaiting(environment)
        requestsSent += 1
        return .send(environment)
    }

    private mutating func finish(_ result: Result) -> Action {
        state = .finished
        return .finish(result)
    }
}
