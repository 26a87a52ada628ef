import EntitlementModel
import Foundation
import ServiceRuntime

/// The endpoints the service calls. Each takes `waitMs`, the time the call may take in all (the settings'
/// default when nil); the ones about a purchase start at `firstEnvironment` (Production unless the purchase
/// is known to be Sandbox's) and go on to Sandbox as `ServerAPIFlow` says.
extension ServerAPIClient {
    /// Get Transaction Info: the transaction `transactionID`, verified.
    public func transactionInfo(
        _ transactionID: String, firstEnvironment: StoreEnvironment = .production, waitMs: Int? = nil
    ) async -> ServerAPIResult<ServerAPISigned<AppStoreTransactionV2>> {
        guard let id = Self.pathID(transactionID) else { return Self.invalid("transaction id", transactionID) }
        return await run(.transactionInfo, first: firstEnvironment, deadline: deadline(waitMs: waitMs)) { _ in
            Request(path: ServerAPIEndpoint.transactionInfo.pathPrefix + id)
        } read: { body, environment throws(ReadFailure) in
            let info = try Self.decode(ServerAPIResponse.TransactionInfo.self, body)
            return try await self.transaction(info.signedTransactionInfo, environment)
        }
    }

    /// Get Transaction History (v2), every page: the customer's transactions for the app, oldest first, each
    /// verified. A page that fails fails the call (ask again later; nothing is half-read).
    public func transactionHistory(
        _ transactionID: String, firstEnvironment: StoreEnvironment = .production, waitMs: Int? = nil
    ) async -> ServerAPIResult<[ServerAPISigned<AppStoreTransactionV2>]> {
        guard let id = Self.pathID(transactionID) else { return Self.invalid("transaction id", transactionID) }
        let deadline = deadline(waitMs: waitMs)
        var transactions: [ServerAPISigned<AppStoreTransactionV2>] = []
        var revision: String?
        var environment = firstEnvironment
        for page in 0... {
            let path = ServerAPIEndpoint.transactionHistory.pathPrefix + id + (revision.map { "?revision=" + Self.queryValue($0) } ?? "")
            // Later pages come from the environment that answered the first.
            let result = await run(.transactionHistory, first: environment, fallsBack: page == 0, deadline: deadline) { _ in
                Request(path: path)
            } read: { body, environment throws(ReadFailure) in
                let history = try Self.decode(ServerAPIResponse.History.self, body)
                var page = HistoryPage(revision: history.revision, hasMore: history.hasMore)
                for jws in history.signedTransactions { page.transactions.append(try await self.transaction(jws, environment)) }
                return page
            }
            guard case .answered(let answer, let answered) = result else { return result.failure() }
            transactions += answer.transactions
            environment = answered
            guard answer.hasMore else { break }
            guard let next = answer.revision, next != revision else {
                return .unverified(detail: "Get Transaction History says hasMore without a new revision")
            }
            revision = next
        }
        return .answered(transactions, environment: environment)
    }

    /// Get All Subscription Statuses: every auto-renewable subscription of the customer, flattened across
    /// subscription groups, with its latest transaction and renewal info verified.
    public func subscriptionStatuses(
        _ transactionID: String, firstEnvironment: StoreEnvironment = .production, waitMs: Int? = nil
    ) async -> ServerAPIResult<[ServerAPISubscriptionStatus]> {
        guard let id = Self.pathID(transactionID) else { return Self.invalid("transaction id", transactionID) }
        return await run(.subscriptionStatuses, first: firstEnvironment, deadline: deadline(waitMs: waitMs)) { _ in
            Request(path: ServerAPIEndpoint.subscriptionStatuses.pathPrefix + id)
        } read: { body, environment throws(ReadFailure) in
            let statuses = try Self.decode(ServerAPIResponse.Statuses.self, body)
            var subscriptions: [ServerAPISubscriptionStatus] = []
            for group in statuses.data {
                for item in group.lastTransactions {
                    var subscription = ServerAPISubscriptionStatus(
                        subscriptionGroupIdentifier: group.subscriptionGroupIdentifier, originalTransactionID: item.originalTransactionID,
                        status: item.status.flatMap(AppStoreSubscriptionStatus.init(rawValue:)), rawStatus: item.status)
                    if let jws = item.signedTransactionInfo { subscription.transaction = try await self.transaction(jws, environment) }
                    if let jws = item.signedRenewalInfo { subscription.renewalInfo = try await self.renewalInfo(jws, environment) }
                    subscriptions.append(subscription)
                }
            }
            return subscriptions
        }
    }

    /// Look Up Order ID: the transactions of the order on the customer's receipt email, verified; Production
    /// first, then Sandbox when Production answers `status` 1. `notFound` when neither knows the order.
    public func lookUpOrder(_ orderID: String, waitMs: Int? = nil) async -> ServerAPIResult<[ServerAPISigned<AppStoreTransactionV2>]> {
        guard let id = Self.pathID(orderID) else { return Self.invalid("order id", orderID) }
        return await run(.orderLookup, first: .production, deadline: deadline(waitMs: waitMs)) { _ in
            Request(path: ServerAPIEndpoint.orderLookup.pathPrefix + id)
        } read: { body, environment throws(ReadFailure) in
            let lookup = try Self.decode(ServerAPIResponse.OrderLookup.self, body)
            guard lookup.status != ServerAPIResponse.OrderLookup.invalid else { return nil }
            var transactions: [ServerAPISigned<AppStoreTransactionV2>] = []
            for jws in lookup.signedTransactions { transactions.append(try await self.transaction(jws, environment)) }
            return transactions
        }
    }

    /// Get Notification History of `environment` (no fallback: each environment keeps its own), every page:
    /// the notifications Apple sent (or tried to) from `start` to `end`, each verified.
    public func notificationHistory(
        environment: StoreEnvironment, start: Date, end: Date, waitMs: Int? = nil
    ) async -> ServerAPIResult<[ServerAPIHistoricNotification]> {
        let deadline = deadline(waitMs: waitMs)
        var notifications: [ServerAPIHistoricNotification] = []
        var token: String?
        repeat {
            let result = await notificationHistoryPage(environment: environment, start: start, end: end, paginationToken: token, deadline: deadline)
            guard case .answered(let page, _) = result else { return result.failure() }
            notifications += page.notifications  // refused ones are left out, as a page's reader leaves them
            token = page.nextPaginationToken
        } while token != nil
        return .answered(notifications, environment: environment)
    }

    /// One page of Get Notification History of `environment` from `start` to `end`: the first when
    /// `paginationToken` is nil, else the one Apple's token of the previous page (asked with the same `start`
    /// and `end`) names; for a caller that keeps its place between pages.
    public func notificationHistoryPage(
        environment: StoreEnvironment, start: Date, end: Date, paginationToken: String?, waitMs: Int? = nil
    ) async -> ServerAPIResult<ServerAPINotificationHistoryPage> {
        await notificationHistoryPage(environment: environment, start: start, end: end, paginationToken: paginationToken,
                                      deadline: deadline(waitMs: waitMs))
    }

    private func notificationHistoryPage(
        environment: StoreEnvironment, start: Date, end: Date, paginationToken token: String?, deadline: Date
    ) async -> ServerAPIResult<ServerAPINotificationHistoryPage> {
        let body = Array(#"{"endDate":\#(Self.milliseconds(end)),"startDate":\#(Self.milliseconds(start))}"#.utf8)
        let path = ServerAPIEndpoint.notificationHistory.pathPrefix + (token.map { "?paginationToken=" + Self.queryValue($0) } ?? "")
        return await run(.notificationHistory, first: environment, fallsBack: false, deadline: deadline) { _ in
            Request(path: path, body: body)
        } read: { body, environment throws(ReadFailure) in
            let history = try Self.decode(ServerAPIResponse.NotificationHistory.self, body)
            var page = ServerAPINotificationHistoryPage(notifications: [], nextPaginationToken: nil)
            if history.hasMore {
                guard let next = history.paginationToken, next != token else {
                    throw ReadFailure(detail: "Get Notification History says hasMore without a new paginationToken")
                }
                page.nextPaginationToken = next
            }
            for item in history.notificationHistory {
                do throws(ReadFailure) {
                    page.notifications.append(ServerAPIHistoricNotification(
                        notification: try await self.notification(item.signedPayload, environment), sendAttempts: item.sendAttempts))
                } catch {
                    page.refused.append(error.detail)
                }
            }
            return page
        }
    }

    // MARK: - Pages

    private struct HistoryPage: Sendable, Hashable {
        var revision: String?
        var hasMore: Bool
        var transactions: [ServerAPISigned<AppStoreTransactionV2>] = []
    }

    // MARK: - Signed fields

    /// A signed transaction verified, decoded, and for this app and the environment that answered.
    func transaction(_ jws: String, _ environment: StoreEnvironment) async throws(ReadFailure) -> ServerAPISigned<AppStoreTransactionV2> {
        let signed = try await verified(jws, .transaction, as: AppStoreTransactionV2.self)
        try check(.transaction, bundleID: signed.payload.bundleID, environment: signed.payload.environment, answeredFrom: environment)
        return signed
    }

    /// Signed renewal info verified, decoded, and of the environment that answered.
    func renewalInfo(_ jws: String, _ environment: StoreEnvironment) async throws(ReadFailure) -> ServerAPISigned<AppStoreRenewalInfoV2> {
        let signed = try await verified(jws, .renewalInfo, as: AppStoreRenewalInfoV2.self)
        try check(.renewalInfo, bundleID: nil, environment: signed.payload.environment, answeredFrom: environment)
        return signed
    }

    /// A notification's signed payload verified, decoded, and for this app and the environment that answered.
    func notification(_ jws: String, _ environment: StoreEnvironment) async throws(ReadFailure) -> ServerAPISigned<AppStoreNotificationV2> {
        let signed = try await verified(jws, .notification, as: AppStoreNotificationV2.self)
        try check(.notification, bundleID: signed.payload.bundleID, environment: signed.payload.environment, answeredFrom: environment)
        return signed
    }

    private func verified<Payload: AppStoreDecodable & Sendable & Hashable>(
        _ jws: String, _ kind: SignedFieldKind, as type: Payload.Type
    ) async throws(ReadFailure) -> ServerAPISigned<Payload> {
        let json: Data, signedDate: Date?
        do {
            (json, signedDate) = try await verifier.verifiedPayload(of: jws, kind: kind)
        } catch {
            throw ReadFailure(detail: "a signed \(kind.rawValue) does not verify: \(error)")
        }
        do {
            return ServerAPISigned(jws: jws, payload: try Payload(jsonData: json), signedDate: signedDate)
        } catch {
            throw ReadFailure(detail: "a signed \(kind.rawValue) does not decode: \(error.description)")
        }
    }

    /// A payload naming another app, or another environment than the one that answered, is not this answer's.
    private func check(_ kind: SignedFieldKind, bundleID: String?, environment: StoreEnvironment?, answeredFrom: StoreEnvironment) throws(ReadFailure) {
        if let bundleID, bundleID != settings.credentials.bundleID {
            throw ReadFailure(detail: "a signed \(kind.rawValue) names the bundle '\(bundleID)', not '\(settings.credentials.bundleID)'")
        }
        if let environment, environment != answeredFrom {
            throw ReadFailure(detail: "a signed \(kind.rawValue) of \(environment.rawValue) came from \(answeredFrom.rawValue)")
        }
    }

    // MARK: - Helpers

    private static func decode<Body: AppStoreDecodable>(_ type: Body.Type, _ body: Data) throws(ReadFailure) -> Body {
        do {
            return try Body(jsonData: body)
        } catch {
            throw ReadFailure(detail: "the answer does not decode: \(error.description)")
        }
    }

    /// `id` when it can go into a path as it is: 1 to 64 ASCII letters and digits (Apple's transaction and
    /// order ids are such).
    private static func pathID(_ id: String) -> String? {
        guard (1...64).contains(id.utf8.count), id.utf8.allSatisfy({ (48...57).contains($0) || (65...90).contains($0) || (97...122).contains($0) }) else {
            return nil
        }
        return id
    }

    private static func invalid<Answer>(_ what: String, _ id: String) -> ServerAPIResult<Answer> {
        .rejected(errorCode: nil, detail: "'\(id.prefix(80))' is not a valid \(what) (1 to 64 letters and digits)")
    }

    /// `date` in Apple's milliseconds since 1970.
    private static func milliseconds(_ date: Date) -> Int64 {
        Int64((date.timeIntervalSince1970 * 1_000).rounded(.down))
    }

    /// `value` percent-encoded for a query (everything but letters, digits and `-._~`).
    private static func queryValue(_ value: String) -> String {
        var allowed = CharacterSet.alphanumerics.intersection(CharacterSet(charactersIn: Unicode.Scalar(0)...Unicode.Scalar(127)))
        allowed.insert(charactersIn: "-._~")
        return value.addingPercentEncoding(withAllowedCharacters: allowed) ?? value
    }
}
