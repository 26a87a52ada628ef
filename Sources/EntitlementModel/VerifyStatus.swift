/// What one verifyReceipt exchange means for the verification, whether Apple answered with a status or the
/// request failed on the way.
public enum VerifyStatus: Sendable, Hashable {
    /// `0`: the receipt is valid.
    case ok
    /// `21006`: valid, but the subscription expired; the decoded receipt is in the body and is used as for `ok`.
    case okExpired
    /// `21007` (a sandbox receipt sent to production) or `21008` (the reverse): ask the other environment.
    case redirect(to: StoreEnvironment)
    /// `21002`: Apple calls the receipt data malformed, but also answers this for passing faults, so the same
    /// request is repeated at once a bounded number of times before the receipt counts as rejected.
    case malformedOrTransient
    /// The receipt is not valid and asking again will not change that: nothing is granted.
    case rejected
    /// Our side is misconfigured (wrong shared secret, a request Apple cannot read, a wrong endpoint URL):
    /// the submission waits until the operator fixes it.
    case configurationError
    /// Apple is slow, down or had an internal error: ask again later.
    case retryable

    /// Classifies an Apple `status`; `isRetryable` is the body's `is-retryable` flag, which decides the
    /// `21100`–`21199` internal errors: final only when it says 0 (Apple's advice for them is to try again later,
    /// so without the flag they are retried).
    ///
    /// This is the one table of Apple statuses. A status it does not list is treated as `retryable`: that is
    /// the safe class, since it neither grants nor throws away a purchase Apple may yet confirm, and the
    /// background retries keep the submission visible as pending until Apple gives an answer we know.
    public init(appleStatus: Int, isRetryable: Bool?) {
        self = switch appleStatus {
        case 0: .ok
        case 21006: .okExpired
        case 21007: .redirect(to: .sandbox)
        case 21008: .redirect(to: .production)
        case 21002: .malformedOrTransient
        case 21003, 21010: .rejected
        case 21000, 21004: .configurationError
        case 21005, 21009: .retryable
        case 21100...21199: isRetryable == false ? .rejected : .retryable
        default: .retryable
        }
    }

    /// Classifies a decoded HTTP 200 answer by its status and `is-retryable` flag.
    public init(_ response: AppStoreResponse) {
        self.init(appleStatus: response.status, isRetryable: response.isRetryable)
    }

    /// Classifies an exchange that produced no decodable answer.
    ///
    /// HTTP 5xx, 408 and 429, timeouts, connection errors and undecodable bodies (a proxy's error page, a
    /// truncated answer) are `retryable`. Any other non-200 status (a redirect, 404, 401…) means the
    /// configured endpoint URL is wrong, a `configurationError`.
    public init(_ failure: TransportFailure) {
        self = switch failure {
        case .httpStatus(let status) where (500...599).contains(status) || status == 408 || status == 429: .retryable
        case .httpStatus: .configurationError
        case .timeout, .connectionError, .undecodableBody: .retryable
        }
    }
}

/// How a verifyReceipt request failed to produce an answer to classify.
public enum TransportFailure: Sendable, Hashable, CustomStringConvertible {
    /// Apple's endpoint answered with an HTTP status other than 200.
    case httpStatus(Int)
    /// No complete answer within the configured time.
    case timeout
    /// The connection could not be made or broke (DNS, TCP, TLS); the detail is the transport's message.
    case connectionError(String)
    /// HTTP 200, but the body is not a verifyReceipt answer; the detail says what is wrong with it.
    case undecodableBody(String)

    /// One line for the log, keeping the transport's detail.
    public var description: String {
        switch self {
        case .httpStatus(let status): "HTTP \(status) from verifyReceipt"
        case .timeout: "verifyReceipt timed out"
        case .connectionError(let detail): "connection to verifyReceipt failed: \(detail)"
        case .undecodableBody(let detail): "undecodable verifyReceipt body: \(detail)"
        }
    }
}
