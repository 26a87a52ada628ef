import Foundation

/// The JSON bodies the App Store Server API answers, decoded leniently as Apple's other bodies are; their
/// signed members stay signed (`String`), for the client to verify before anything is read from them.
public enum ServerAPIResponse {
    /// An error answer: `{"errorCode": 4040010, "errorMessage": "Transaction id not found."}`.
    public struct ErrorBody: AppStoreDecodable, Sendable, Hashable {
        /// Apple's `errorCode` (e.g. `4040010`); nil when absent.
        public var errorCode: Int?
        /// Apple's `errorMessage`, text for logs only; nil when absent or empty.
        public var errorMessage: String?

        private enum CodingKeys: String, CodingKey { case errorCode, errorMessage }

        public init(from decoder: any Decoder) throws {
            let body = try decoder.container(keyedBy: CodingKeys.self)
            errorCode = try body.appleInt(.errorCode)
            errorMessage = try body.appleString(.errorMessage)
        }

        /// Apple's `errorCode` in `body`, or nil when the body is not such an answer (an outage's HTML page, say).
        public static func errorCode(in body: Data) -> Int? {
            (try? Self(jsonData: body))?.errorCode
        }
    }

    /// Get Transaction Info: `{"signedTransactionInfo": "<JWS>"}`.
    public struct TransactionInfo: AppStoreDecodable, Sendable, Hashable {
        /// `signedTransactionInfo`: the transaction as a JWS, not yet verified; required.
        public var signedTransactionInfo: String

        private enum CodingKeys: String, CodingKey { case signedTransactionInfo }

        public init(from decoder: any Decoder) throws {
            signedTransactionInfo = try decoder.container(keyedBy: CodingKeys.self).appleRequiredString(.signedTransactionInfo)
        }
    }

    /// One page of Get Transaction History (v1 and v2 share the shape): up to 20 signed transactions, and
    /// `revision` to ask for the next page while `hasMore`.
    public struct History: AppStoreDecodable, Sendable, Hashable {
        /// `revision`: pass it back to get the next page; nil when absent.
        public var revision: String?
        /// `hasMore`: true when another page follows; false when absent.
        public var hasMore: Bool
        /// `bundleId`: the app the history is for; nil when absent.
        public var bundleID: String?
        /// `appAppleId`: the app's numeric App Store id; nil when absent.
        public var appAppleID: Int64?
        /// `environment`: nil when absent or neither `Production` nor `Sandbox`.
        public var environment: StoreEnvironment?
        /// `signedTransactions`: this page's transactions as JWS, not yet verified; empty when absent.
        public var signedTransactions: [String]

        private enum CodingKeys: String, CodingKey {
            case revision, hasMore, bundleId, appAppleId, environment, signedTransactions
        }

        public init(from decoder: any Decoder) throws {
            let body = try decoder.container(keyedBy: CodingKeys.self)
            revision = try body.appleString(.revision)
            hasMore = try body.appleBool(.hasMore) ?? false
            bundleID = try body.appleString(.bundleId)
            appAppleID = try body.appleInt(.appAppleId).map(Int64.init)
            environment = try body.appleEnvironment(.environment)
            signedTransactions = try body.decodeIfPresent([String].self, forKey: .signedTransactions) ?? []
        }
    }

    /// Get All Subscription Statuses: per subscription group, the latest transaction and renewal info of each
    /// of the customer's subscriptions in it, with Apple's status.
    public struct Statuses: AppStoreDecodable, Sendable, Hashable {
        /// `environment`: nil when absent or neither `Production` nor `Sandbox`.
        public var environment: StoreEnvironment?
        /// `bundleId`: the app the statuses are for; nil when absent.
        public var bundleID: String?
        /// `appAppleId`: the app's numeric App Store id; nil when absent.
        public var appAppleID: Int64?
        /// `data`: one item per subscription group; empty when absent.
        public var data: [SubscriptionGroup]

        /// `SubscriptionGroupIdentifierItem`.
        public struct SubscriptionGroup: Decodable, Sendable, Hashable {
            /// `subscriptionGroupIdentifier`: the App Store Connect group; nil when absent.
            public var subscriptionGroupIdentifier: String?
            /// `lastTransactions`: one item per subscription of the group; empty when absent.
            public var lastTransactions: [LastTransaction]

            private enum CodingKeys: String, CodingKey { case subscriptionGroupIdentifier, lastTransactions }

            public init(from decoder: any Decoder) throws {
                let item = try decoder.container(keyedBy: CodingKeys.self)
                subscriptionGroupIdentifier = try item.appleString(.subscriptionGroupIdentifier)
                lastTransactions = try item.decodeIfPresent([LastTransaction].self, forKey: .lastTransactions) ?? []
            }
        }

        /// `LastTransactionsItem`: `status` is Apple's subscription status (`AppStoreSubscriptionStatus`).
        public struct LastTransaction: Decodable, Sendable, Hashable {
            /// `status`: 1 active, 2 expired, 3 billing retry, 4 grace period, 5 revoked; nil when absent.
            public var status: Int?
            /// `originalTransactionId`: the subscription's chain; nil when absent.
            public var originalTransactionID: String?
            /// `signedTransactionInfo`: its latest transaction as a JWS, not yet verified; nil when absent.
            public var signedTransactionInfo: String?
            /// `signedRenewalInfo`: its renewal info as a JWS, not yet verified; nil when absent.
            public var signedRenewalInfo: String?

            private enum CodingKeys: String, CodingKey {
                case status, originalTransactionId, signedTransactionInfo, signedRenewalInfo
            }

            public init(from decoder: any Decoder) throws {
                let item = try decoder.container(keyedBy: CodingKeys.self)
                status = try item.appleInt(.status)
                originalTransactionID = try item.appleString(.originalTransactionId)
                signedTransactionInfo = try item.appleString(.signedTransactionInfo)
                signedRenewalInfo = try item.appleString(.signedRenewalInfo)
            }
        }

        private enum CodingKeys: String, CodingKey { case environment, bundleId, appAppleId, data }

        public init(from decoder: any Decoder) throws {
            let body = try decoder.container(keyedBy: CodingKeys.self)
            environment = try body.appleEnvironment(.environment)
            bundleID = try body.appleString(.bundleId)
            appAppleID = try body.appleInt(.appAppleId).map(Int64.init)
            data = try body.decodeIfPresent([SubscriptionGroup].self, forKey: .data) ?? []
        }
    }

    /// Look Up Order ID: `status` 0 (the order is valid) with its signed transactions, or 1 (invalid).
    public struct OrderLookup: AppStoreDecodable, Sendable, Hashable {
        /// `status`: 0 when the order is valid, ``invalid`` (1) when not; required.
        public var status: Int
        /// `signedTransactions`: the order's transactions as JWS, not yet verified; empty when absent.
        public var signedTransactions: [String]

        /// `OrderLookupStatus.INVALID`: no such order in the environment asked.
        public static let invalid = 1

        private enum CodingKeys: String, CodingKey { case status, signedTransactions }

        public init(from decoder: any Decoder) throws {
            let body = try decoder.container(keyedBy: CodingKeys.self)
            guard let status = try body.appleInt(.status) else {
                throw DecodingError.keyNotFound(CodingKeys.status, .init(codingPath: body.codingPath, debugDescription: "an order lookup needs status"))
            }
            self.status = status
            signedTransactions = try body.decodeIfPresent([String].self, forKey: .signedTransactions) ?? []
        }
    }

    /// One page of Get Notification History: up to 20 notifications Apple sent (or tried to), and
    /// `paginationToken` for the next page while `hasMore`.
    public struct NotificationHistory: AppStoreDecodable, Sendable, Hashable {
        /// `paginationToken`: pass it back to get the next page; nil when absent.
        public var paginationToken: String?
        /// `hasMore`: true when another page follows; false when absent.
        public var hasMore: Bool
        /// `notificationHistory`: this page's notifications; empty when absent.
        public var notificationHistory: [Item]

        /// `NotificationHistoryResponseItem`: the notification's `signedPayload` and each delivery attempt.
        public struct Item: Decodable, Sendable, Hashable {
            /// `signedPayload`: the notification as a JWS, not yet verified; required.
            public var signedPayload: String
            /// `sendAttempts`: Apple's delivery attempts, as listed; empty when absent.
            public var sendAttempts: [SendAttempt]

            private enum CodingKeys: String, CodingKey { case signedPayload, sendAttempts }

            public init(from decoder: any Decoder) throws {
                let item = try decoder.container(keyedBy: CodingKeys.self)
                signedPayload = try item.appleRequiredString(.signedPayload)
                sendAttempts = try item.decodeIfPresent([SendAttempt].self, forKey: .sendAttempts) ?? []
            }
        }

        /// `SendAttemptItem`: when Apple tried and what came of it (`SUCCESS`, `TIMED_OUT`,
        /// `UNSUCCESSFUL_HTTP_RESPONSE_CODE`…, as Apple wrote it).
        public struct SendAttempt: Decodable, Sendable, Hashable {
            /// `attemptDate` (ms since 1970): when Apple tried; nil when absent.
            public var attemptDate: Date?
            /// `sendAttemptResult` as Apple wrote it; nil when absent.
            public var sendAttemptResult: String?

            private enum CodingKeys: String, CodingKey { case attemptDate, sendAttemptResult }

            public init(from decoder: any Decoder) throws {
                let item = try decoder.container(keyedBy: CodingKeys.self)
                attemptDate = try item.appleMilliseconds(.attemptDate)
                sendAttemptResult = try item.appleString(.sendAttemptResult)
            }
        }

        private enum CodingKeys: String, CodingKey { case paginationToken, hasMore, notificationHistory }

        public init(from decoder: any Decoder) throws {
            let body = try decoder.container(keyedBy: CodingKeys.self)
            paginationToken = try body.appleString(.paginationToken)
            hasMore = try body.appleBool(.hasMore) ?? false
            notificationHistory = try body.decodeIfPresent([Item].self, forKey: .notificationHistory) ?? []
        }
    }
}

/// Apple's status of an auto-renewable subscription (the Server API's `status`, a notification's
/// `data.status`).
public enum AppStoreSubscriptionStatus: Int, Sendable, Hashable, CaseIterable {
    case active = 1, expired = 2, billingRetry = 3, gracePeriod = 4, revoked = 5
}
