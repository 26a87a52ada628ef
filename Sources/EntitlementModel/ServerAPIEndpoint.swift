/// The App Store Server API endpoints the service calls, with Apple's paths and rate limits: the names the
/// client's request budget, its log and the fake App Store's control API share.
public enum ServerAPIEndpoint: String, Sendable, Hashable, CaseIterable {
    /// Get Transaction Info: `GET /inApps/v1/transactions/{transactionId}`.
    case transactionInfo = "transaction_info"
    /// Get Transaction History (v2): `GET /inApps/v2/history/{transactionId}?revision=…`.
    case transactionHistory = "transaction_history"
    /// Get All Subscription Statuses: `GET /inApps/v1/subscriptions/{transactionId}`.
    case subscriptionStatuses = "subscription_statuses"
    /// Look Up Order ID: `GET /inApps/v1/lookup/{orderId}`.
    case orderLookup = "order_lookup"
    /// Get Notification History: `POST /inApps/v1/notifications/history?paginationToken=…`.
    case notificationHistory = "notification_history"

    /// The path before the id (no id for notification history).
    public var pathPrefix: String {
        switch self {
        case .transactionInfo: "/inApps/v1/transactions/"
        case .transactionHistory: "/inApps/v2/history/"
        case .subscriptionStatuses: "/inApps/v1/subscriptions/"
        case .orderLookup: "/inApps/v1/lookup/"
        case .notificationHistory: "/inApps/v1/notifications/history"
        }
    }

    /// Apple's documented limit in Production, requests per second, enforced per app over each hour
    /// ("Identifying rate limits"); Sandbox allows a tenth of it.
    public var appleRatePerSecond: Double {
        self == .orderLookup ? 10 : 50
    }

    /// The client's own allowance for this endpoint in `environment`: four fifths of Apple's limit on average
    /// and a burst of the last fifth (at least one request), so that no second ever holds more than Apple's
    /// limit however large the backlog.
    public func allowance(in environment: StoreEnvironment) -> RequestBudget.Allowance {
        let limit = appleRatePerSecond * (environment == .production ? 1 : 0.1)
        return RequestBudget.Allowance(ratePerSecond: limit * 0.8, burst: max(1, (limit * 0.2).rounded(.down)))
    }

    /// The request budget's key for this endpoint in `environment`: each environment has its own limit.
    public func budgetKey(in environment: StoreEnvironment) -> String {
        rawValue + "." + environment.rawValue
    }

    /// Every endpoint's allowance in both environments, keyed as `budgetKey(in:)`.
    public static var allowances: [String: RequestBudget.Allowance] {
        var allowances: [String: RequestBudget.Allowance] = [:]
        for endpoint in allCases {
            for environment in [StoreEnvironment.production, .sandbox] {
                allowances[endpoint.budgetKey(in: environment)] = endpoint.allowance(in: environment)
            }
        }
        return allowances
    }
}
