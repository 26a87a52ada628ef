import Foundation

/// What one App Store Server API exchange means, whether Apple answered or the request failed on the way:
/// the one table of Apple's HTTP statuses and `errorCode`s, as `VerifyStatus` is for verifyReceipt.
///
/// Apple answers errors as `{"errorCode": 4040010, "errorMessage": "..."}` with a matching HTTP status.
public enum ServerAPIStatus: Sendable, Hashable {
    /// 200: the answer is in the body.
    case ok
    /// Not known in the environment asked: `4040010` (transaction id not found) and `4040005` (original
    /// transaction id not found), or a Look Up Order ID answer with `status` 1. Production's "not found" is
    /// asked again of Sandbox, as `21007` is; Sandbox's is final.
    case notFound(errorCode: Int?)
    /// 401 (with Apple's `errorCode` when its body has one): the JWT was refused. Production refuses
    /// Sandbox-only keys before an app's release, so this too is asked again of Sandbox; from both
    /// environments it is a configuration error.
    case unauthorized(errorCode: Int?)
    /// 429 (`4290000`): wait until `retryAfter` (Apple's `Retry-After`, a UNIX time in milliseconds), shared
    /// by every request of the app, since Apple's limits are per app.
    case rateLimited(retryAfter: Date?, errorCode: Int?)
    /// Apple could not answer now (`5000001`, `4040002`, `4040004`, `4040006`, any 5xx, timeouts, broken
    /// connections): ask again later with backoff. `httpStatus` is nil when no answer came at all.
    case retryable(errorCode: Int?, httpStatus: Int?)
    /// The request itself is wrong and asking again will not help (other 4xx and 3xx: an invalid id, an
    /// unknown app or account with an `errorCode`; a wrong base URL or a proxy's redirect without one): the
    /// operation fails and says why.
    case rejected(errorCode: Int?, httpStatus: Int)

    /// Apple's `errorCode`s that mean "try again later".
    public static let retryableErrorCodes: Set<Int> = [4_040_002, 4_040_004, 4_040_006, 5_000_001]
    /// Apple's `errorCode`s that mean "not in this environment".
    public static let notFoundErrorCodes: Set<Int> = [4_040_005, 4_040_010]

    /// Classifies an answer: its HTTP status, Apple's `errorCode` from the body (when it has one) and the
    /// `Retry-After` header's value, received at `now`.
    public init(httpStatus: Int, errorCode: Int?, retryAfter: String?, now: Date) {
        if let errorCode, Self.retryableErrorCodes.contains(errorCode) {
            self = .retryable(errorCode: errorCode, httpStatus: httpStatus)
            return
        }
        if let errorCode, Self.notFoundErrorCodes.contains(errorCode) {
            self = .notFound(errorCode: errorCode)
            return
        }
        self = switch httpStatus {
        case 200: .ok
        case 401: .unauthorized(errorCode: errorCode)
        case 429: .rateLimited(retryAfter: retryAfter.flatMap { Self.retryAfterDate($0, now: now) }, errorCode: errorCode)
        case 408, 500...599: .retryable(errorCode: errorCode, httpStatus: httpStatus)
        default: .rejected(errorCode: errorCode, httpStatus: httpStatus)
        }
    }

    /// A request that got no answer: always worth asking again later.
    public init(_ failure: ServerAPITransportFailure) {
        self = .retryable(errorCode: nil, httpStatus: nil)
    }

    /// What Apple answered, as a problem's `apple_status` shows it: Apple's `errorCode` when its body had one,
    /// else the HTTP status; nil for a 200 (an order with `status` 1 too: not an error) and for a request
    /// Apple never answered (a timeout, a broken connection).
    public var appleStatus: Int? {
        switch self {
        case .ok: nil
        case .notFound(let errorCode): errorCode
        case .unauthorized(let errorCode): errorCode ?? 401
        case .rateLimited(_, let errorCode): errorCode ?? 429
        case .retryable(let errorCode, let httpStatus): errorCode ?? httpStatus
        case .rejected(let errorCode, let httpStatus): errorCode ?? httpStatus
        }
    }

    /// Apple's `Retry-After`: a UNIX time in milliseconds. A small number (under ten years of seconds) is read
    /// as HTTP's delay in seconds instead, relative to `now`, so a proxy's header is not misread as 1970.
    public static func retryAfterDate(_ value: String, now: Date) -> Date? {
        guard let number = Double(value.trimmingCharacters(in: .whitespaces)), number >= 0, number.isFinite else { return nil }
        if number < 315_360_000 { return now.addingTimeInterval(number) }
        return Date(timeIntervalSince1970: number / 1000)
    }
}

/// An App Store Server API request that got no HTTP answer.
public enum ServerAPITransportFailure: Sendable, Hashable, CustomStringConvertible {
    /// No complete answer within the configured time.
    case timeout
    /// The connection could not be made or broke (DNS, TCP, TLS); the detail is the transport's message.
    case connectionError(String)
    /// The answer's body is not what the endpoint sends; the detail says what is wrong with it.
    case undecodableBody(String)

    /// One line for the log, keeping the transport's detail.
    public var description: String {
        switch self {
        case .timeout: "App Store Server API timed out"
        case .connectionError(let detail): "connection to the App Store Server API failed: \(detail)"
        case .undecodableBody(let detail): "undecodable App Store Server API body: \(detail)"
        }
    }
}
