import AppStore
import ServiceRuntime
import EntitlementModel
import Foundation

/// Why an App Store Server API read for a user could not be recorded; nothing was changed. `appleStatus` is
/// what Apple answered (`ServerAPIResult`'s: its `errorCode`, else its HTTP status), nil when it never did.
enum AppleReadFailure: Error, Sendable, Equatable {
    /// Neither environment knows the order (or the purchase).
    case notFound
    /// Apple is unavailable within the caller's wait: ask again after `retryAfterSeconds`.
    case unavailable(retryAfterSeconds: Int, detail: String, appleStatus: Int?)
    /// Apple refused the key in every environment (`.key`), or the request with no `errorCode` to say why
    /// (`.request`): the configuration is wrong.
    case configuration(ServerAPIFlow.Refusal, detail: String, appleStatus: Int?)
    /// Apple refused the request for what it asks (`appleStatus`: its `errorCode`), or its answer did not
    /// verify (nil: Apple answered 200).
    case refused(detail: String, appleStatus: Int?)

    /// What Apple answered, for the problem's `apple_status`; nil when it answered no error.
    var appleStatus: Int? {
        switch self {
        case .notFound: nil
        case .unavailable(_, _, let appleStatus), .configuration(_, _, let appleStatus), .refused(_, let appleStatus): appleStatus
        }
    }
}

/// The admin side of the App Store Server API: attaching a purchase to a user by the order ID on the
/// customer's receipt email, and re-reading every purchase a user owns. Every answer Apple gives is read
/// in full before anything is recorded, so that a failure part-way changes nothing; what is recorded goes
/// through the `PurchaseRecorder` (once per transaction, ownership rules, audit).
@Loop
struct AppleAccountSync {
    let client: ServerAPIClient
    let db: PostgresPool
    let recorder: PurchaseRecorder
    let catalog: CatalogCache

    /// Look Up Order ID, then the order's transactions recorded for `userID` as if the user posted them (the
    /// restore policy decides a purchase another user owns). Returns the previous owners of moved purchases.
    /// - Throws: `AppleReadFailure`, `OwnershipConflict` under `keep`.
    func attachOrder(_ orderID: String, to userID: String, waitMs: Int, actor: String) async throws -> [String] {
        let (transactions, environment) = try Self.answer(await client.lookUpOrder(orderID, waitMs: waitMs))
        guard !transactions.isEmpty else { throw AppleReadFailure.notFound }
        let recorded = try await recorder.record(
            transactions: transactions.map(\.payload.transaction), renewals: [], latestReceipt: nil, appleStatus: 0,
            environment: environment,
            context: .init(poster: userID, movesOwnership: true, actor: actor, claim: nil, orderID: nil, appleOrderID: orderID))
        Log.info("apple_order_attached", ["user_id": userID, "environment": environment.rawValue,
                                          "transactions": transactions.count, "new": recorded.newTransactions])
        return recorded.transferredFrom
    }

    /// Get Transaction History (every page) and Get All Subscription Statuses for each purchase `userID`
    /// owns, recorded for their owners once every answer is in. A purchase neither environment knows is left
    /// as it is. Returns how many transactions Apple listed.
    /// - Throws: `AppleReadFailure`.
    func refresh(userID: String, waitMs: Int) async throws -> Int {
        let deadline = ContinuousClock.now + .milliseconds(waitMs)
        var purchases: [String: StoreEnvironment] = [:]
        // Xcode and LocalTesting purchases are left out: no App Store knows them.
        for owned in try await TransactionStore().list(ownedBy: userID, on: db)
        where purchases[owned.transaction.originalTransactionID] == nil && SignedDataEnvironment.isAppStoreID(owned.transaction.originalTransactionID) {
            purchases[owned.transaction.originalTransactionID] = owned.environment
        }
        var read: [StoreEnvironment: (transactions: [String: StoreTransaction], renewals: [RenewalInfo])] = [:]
        // One customer's history lists every purchase of theirs: a purchase already listed is not asked again.
        // (A set, not a scan of what was read: a user with thousands of consumables would hold the loop.)
        var listedChains: Set<String> = []
        for (original, known) in purchases.sorted(by: { $0.key < $1.key }) {
            if listedChains.contains(original) { continue }
            guard let (history, environment) = try Self.known(await client.transactionHistory(original, firstEnvironment: known, waitMs: Self.left(deadline))) else {
                continue
            }
            var entry = read[environment] ?? ([:], [])
            for signed in history {
                entry.transactions[signed.payload.transaction.transactionID] = signed.payload.transaction
                listedChains.insert(signed.payload.transaction.originalTransactionID)
            }
            let statuses = try Self.known(await client.subscriptionStatuses(original, firstEnvironment: environment, waitMs: Self.left(deadline)))?.0 ?? []
            for status in statuses {
                if let signed = status.transaction {
                    entry.transactions[signed.payload.transaction.transactionID] = signed.payload.transaction
                    listedChains.insert(signed.payload.transaction.originalTransactionID)
                }
                if let renewal = status.renewalInfo { entry.renewals.append(renewal.payload.renewal) }
            }
            read[environment] = entry
        }
        var listed = 0
        for (environment, entry) in read.sorted(by: { $0.key.rawValue < $1.key.rawValue }) {
            let transactions = entry.transactions.values.sorted { $0.transactionID < $1.transactionID }
            listed += transactions.count
            let owners = try await OwnerStore().owners(of: Array(Set(transactions.map(\.originalTransactionID))).sorted(), on: db)
            let byOwner = Dictionary(grouping: transactions) { owners[$0.originalTransactionID] ?? userID }
            for (owner, owned) in byOwner.sorted(by: { $0.key < $1.key }) {
                let chains = Set(owned.map(\.originalTransactionID))
                _ = try await recorder.record(
                    transactions: owned, renewals: entry.renewals.filter { chains.contains($0.originalTransactionID) }, latestReceipt: nil,
                    appleStatus: 0, environment: environment,
                    context: .init(poster: owner, movesOwnership: false, actor: "app-store-server-api", claim: nil, orderID: nil))
            }
        }
        Log.info("apple_refresh", ["user_id": userID, "purchases": purchases.count, "transactions": listed])
        return listed
    }

    /// The milliseconds left until `deadline` (0 once it has passed: the call then asks nothing of Apple).
    private static func left(_ deadline: ContinuousClock.Instant) -> Int {
        let left = ContinuousClock.now.duration(to: deadline).components
        return max(0, Int(left.seconds) * 1_000 + Int(left.attoseconds / 1_000_000_000_000_000))
    }

    /// The answer of `result` and its environment, or the failure it comes to.
    static func answer<Answer>(_ result: ServerAPIResult<Answer>, now: Date = Date()) throws(AppleReadFailure) -> (Answer, StoreEnvironment) {
        switch result {
        case .answered(let answer, let environment):
            return (answer, environment)
        case .notFound:
            throw .notFound
        case .retryLater(let until, let detail, let appleStatus):
            throw .unavailable(retryAfterSeconds: seconds(until: until, now: now), detail: detail, appleStatus: appleStatus)
        case .rateLimited(let until, let appleStatus):
            throw .unavailable(retryAfterSeconds: seconds(until: until, now: now), detail: "the App Store's rate limit holds requests",
                               appleStatus: appleStatus)
        case .configurationError(let refusal, let detail, let appleStatus):
            throw .configuration(refusal, detail: detail, appleStatus: appleStatus)
        case .rejected(let errorCode, let detail):
            throw .refused(detail: detail, appleStatus: errorCode)
        case .unverified(let detail):
            throw .refused(detail: detail, appleStatus: nil)
        }
    }

    /// The answer of `result` and its environment; nil when Apple does not know the purchase.
    static func known<Answer>(_ result: ServerAPIResult<Answer>) throws -> (Answer, StoreEnvironment)? {
        if case .notFound = result { return nil }
        return try answer(result)
    }

    /// Whole seconds from `now` to `until`, rounded up, at least 1 (1 when Apple named no time).
    static func seconds(until: Date?, now: Date) -> Int {
        guard let until else { return 1 }
        return max(1, Int(until.timeIntervalSince(now).rounded(.up)))
    }
}
