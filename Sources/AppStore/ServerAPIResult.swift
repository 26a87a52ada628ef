import EntitlementModel
import Foundation

/// What one App Store Server API call came to, after the Production-then-Sandbox flow, the waits for the
/// request budget and Apple's rate limit, and the retries that fitted in the call's time.
///
/// A failure carries what Apple answered, for the problem's `apple_status`: `appleStatus` is Apple's last error
/// answer in the call (`ServerAPIFlow.appleStatus`: its `errorCode`, else its HTTP status), nil when Apple never
/// answered (timeouts, broken connections, no time left, a rate limit holding the request before it was sent);
/// a rejection's `errorCode` is one (nil for an id never sent).
public enum ServerAPIResult<Answer: Sendable & Hashable>: Sendable, Hashable {
    /// Apple answered from `environment`; every signed field in `answer` verified and decoded.
    case answered(Answer, environment: StoreEnvironment)
    /// No environment asked knows the id or the order (`4040010`, `4040005`, an order with `status` 1).
    case notFound
    /// Apple could not answer within the call's time (`5000001`, `4040002`, `4040004`, `4040006`, 5xx,
    /// timeouts, broken connections, the request budget spent): ask again, not before `until` when given.
    case retryLater(until: Date?, detail: String, appleStatus: Int?)
    /// Apple's rate limit (429) holds every request until `until`, beyond the call's time.
    case rateLimited(until: Date, appleStatus: Int?)
    /// Apple refused the key (401) in every environment asked (`.key`), or refused the request with no
    /// `errorCode` to say why (`.request`: a bare 404, a 302): the configuration is wrong, asking again will
    /// not help.
    case configurationError(ServerAPIFlow.Refusal, detail: String, appleStatus: Int?)
    /// Apple refused the request for what it asks (an invalid id, say): `errorCode` says why.
    case rejected(errorCode: Int?, detail: String)
    /// Apple's answer carries a signed field that does not verify, or does not decode, or names another app
    /// or environment: nothing of it may be used.
    case unverified(detail: String)

    /// The answer, when Apple gave one.
    public var answer: Answer? {
        if case .answered(let answer, _) = self { answer } else { nil }
    }

    /// The same outcome with no answer, for a call that ends in another one's failure.
    func failure<Other>(as: Other.Type = Other.self) -> ServerAPIResult<Other> {
        switch self {
        case .answered: preconditionFailure("an answered result is not a failure")
        case .notFound: .notFound
        case .retryLater(let until, let detail, let appleStatus): .retryLater(until: until, detail: detail, appleStatus: appleStatus)
        case .rateLimited(let until, let appleStatus): .rateLimited(until: until, appleStatus: appleStatus)
        case .configurationError(let refusal, let detail, let appleStatus):
            .configurationError(refusal, detail: detail, appleStatus: appleStatus)
        case .rejected(let errorCode, let detail): .rejected(errorCode: errorCode, detail: detail)
        case .unverified(let detail): .unverified(detail: detail)
        }
    }
}

/// One subscription in Get All Subscription Statuses: its group, Apple's status, and its latest transaction
/// and renewal info, verified.
public struct ServerAPISubscriptionStatus: Sendable, Hashable {
    /// The group's `subscriptionGroupIdentifier`; nil when Apple omitted it.
    public var subscriptionGroupIdentifier: String?
    /// The item's `originalTransactionId`; nil when Apple omitted it.
    public var originalTransactionID: String?
    /// Apple's `status` (1 active, 2 expired, 3 billing retry, 4 grace period, 5 revoked); nil when Apple
    /// sent a value this code does not know (see `rawStatus`).
    public var status: AppStoreSubscriptionStatus?
    /// Apple's `status` exactly as sent, known or not; nil when Apple omitted it.
    public var rawStatus: Int?
    /// The verified `signedTransactionInfo`: the subscription's latest transaction; nil when Apple sent none.
    public var transaction: ServerAPISigned<AppStoreTransactionV2>?
    /// The verified `signedRenewalInfo`; nil when Apple sent none.
    public var renewalInfo: ServerAPISigned<AppStoreRenewalInfoV2>?

    /// A status with these values; `status` is not derived from `rawStatus` (the client sets both).
    public init(subscriptionGroupIdentifier: String?, originalTransactionID: String?, status: AppStoreSubscriptionStatus?,
                rawStatus: Int?, transaction: ServerAPISigned<AppStoreTransactionV2>? = nil,
                renewalInfo: ServerAPISigned<AppStoreRenewalInfoV2>? = nil) {
        self.subscriptionGroupIdentifier = subscriptionGroupIdentifier
        self.originalTransactionID = originalTransactionID
        self.status = status
        self.rawStatus = rawStatus
        self.transaction = transaction
        self.renewalInfo = renewalInfo
    }
}

/// One notification of Get Notification History: the notification verified (its `signedPayload` is the
/// `jws`, to feed to the same path as a notification Apple POSTs) and Apple's delivery attempts.
public struct ServerAPIHistoricNotification: Sendable, Hashable {
    /// The verified `signedPayload`, with its JWS for the notification intake.
    public var notification: ServerAPISigned<AppStoreNotificationV2>
    /// Apple's `sendAttempts` for it (`attemptDate`, `sendAttemptResult`), as listed.
    public var sendAttempts: [ServerAPIResponse.NotificationHistory.SendAttempt]
}

/// One page of Get Notification History: its notifications, verified, and Apple's `paginationToken` for the
/// next page (nil on the last).
public struct ServerAPINotificationHistoryPage: Sendable, Hashable {
    /// The page's notifications whose `signedPayload` verified and decoded, in Apple's order.
    public var notifications: [ServerAPIHistoricNotification]
    /// Why each notification of the page whose signed payload was refused was refused (never the payload): one
    /// bad notification is left out rather than failing the page, which would stop the history at it for good.
    public var refused: [String] = []
    /// Apple's `paginationToken` while `hasMore`; nil on the last page.
    public var nextPaginationToken: String?
}
