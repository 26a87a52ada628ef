import ServiceRuntime
import EntitlementModel
import Foundation

/// A verified receipt whose purchase already belongs to another user, with `RESTORE_POLICY=keep`.
struct OwnershipConflict: Error, Sendable {
    var originalTransactionID: String
    var owner: String
}

/// The lease an attempt recorded under ran out and another attempt claimed the submission: this late answer
/// is not recorded.
struct ClaimSuperseded: Error, Sendable {
    var verificationID: UUID
}

/// What recording a verified receipt changed, for the answer to the client.
struct RecordedPurchases: Sendable {
    /// Previous owners of purchases that moved to the poster (`transferred_from`).
    var transferredFrom: [String]
    /// How many transactions were seen for the first time.
    var newTransactions: Int
}

/// Applies one verified App Store answer to the store in ONE database transaction: every transaction of
/// `in_app` and `latest_receipt_info` once (by `transaction_id`), ownership by the restore policy and by
/// orders' `app_account_token`, subscription renewal state, consumable credits and refund debits once per
/// transaction, order fulfilment, audit events for transfers, and the submission marked verified.
///
/// Every "once" rests on a unique key of the schema, so concurrent recordings of the same receipt cannot
/// count anything twice; a conflict under `keep` rolls everything back. The decisions are made here; the
/// stores run the statements. The webhook events of every user whose state the recording changes (the
/// purchases' owners, the poster, both sides of a transfer) are written in the same transaction.
@Loop
struct PurchaseRecorder {
    let db: PostgresPool
    let restorePolicy: RestorePolicy
    let events: EventRecorder
    let submissions = SubmissionStore()
    let transactionStore = TransactionStore()
    let owners = OwnerStore()
    let subscriptions = SubscriptionStore()
    let ledger = LedgerStore()
    let orders = OrderStore()

    /// Who posted, and under which submission (nil for Apple's reports).
    struct Context: Sendable {
        var poster: String
        /// True for a user's own post: the restore policy may move purchases to the poster (or refuse with a
        /// conflict). False for Apple's reports (notifications, renewal refreshes), recorded for whoever owns
        /// each purchase when the transaction runs: a transfer that committed since the owner was looked up
        /// stands.
        var movesOwnership: Bool
        var actor: String
        /// The lease of the posted submission being verified; the recording happens only while it holds.
        var claim: SubmissionClaim?
        var orderID: UUID?
    }

    func record(_ response: AppStoreResponse, environment: StoreEnvironment, catalog: Catalog, context: Context) async throws -> RecordedPurchases {
        try await record(transactions: response.transactions(), renewals: response.renewalInfo(), latestReceipt: response.latestReceipt,
                         appleStatus: response.status, environment: environment, catalog: catalog, context: context)
    }

    /// Records what Apple said about some purchases, from a verifyReceipt answer or a notification.
    /// - Throws: `OwnershipConflict` under `keep`; `ClaimSuperseded` when the context's lease no longer holds.
    func record(transactions: [StoreTransaction], renewals renewalList: [RenewalInfo], latestReceipt: String?, appleStatus: Int,
                environment: StoreEnvironment, catalog: Catalog, context: Context) async throws -> RecordedPurchases {
        let renewals = Dictionary(renewalList.map { ($0.originalTransactionID, $0) }) { _, last in last }
        var unwatched: Set<String> = []
        while true {
            do {
                return try await recordOnce(transactions: transactions, renewals: renewals, latestReceipt: latestReceipt,
                                            appleStatus: appleStatus, environment: environment, catalog: catalog, context: context,
                                            alsoWatching: unwatched)
            } catch let changed as EventScopeChanged where !changed.users.isSubset(of: unwatched) {
                unwatched.formUnion(changed.users)  // an owner changed under us: again, watching them too
            }
        }
    }

    private func recordOnce(transactions: [StoreTransaction], renewals: [String: RenewalInfo], latestReceipt: String?, appleStatus: Int,
                            environment: StoreEnvironment, catalog: Catalog, context: Context,
                            alsoWatching: Set<String>) async throws -> RecordedPurchases {
        let credits = Self.consumableCredits(transactions, catalog: catalog)
        let purchases = Set(transactions.map(\.originalTransactionID)).sorted()
        return try await db.transaction { connection in
            if let claim = context.claim, try await !submissions.lockForRecording(claim, on: connection) {
                throw ClaimSuperseded(verificationID: claim.verificationID)
            }
            let users = try await usersConcerned(transactions, purchases: purchases, context: context, on: connection)
            let watch = try await events.watch(users.union(alsoWatching), catalog: catalog, now: Date(), on: connection)
            let inserted = try await transactionStore.record(transactions, environment: environment,
                                                             firstVerificationID: context.claim?.verificationID, on: connection)
            let transfers = try await applyOwnership(transactions, catalog: catalog, context: context, on: connection)
            try await subscriptions.record(Self.subscriptionStates(transactions, renewals: renewals, now: Date()),
                                           latestReceipt: latestReceipt, environment: environment, on: connection)
            try await ledger.credit(credits, on: connection)
            try await ledger.debitRefunds(credits.map(\.transactionID), on: connection)
            try await fulfilOrders(transactions, context: context, on: connection)
            if let claim = context.claim {
                try await submissions.markVerified(claim, appleStatus: appleStatus, environment: environment, on: connection)
            }
            let report = AppStoreReport(transactions: transactions, newTransactionIDs: inserted,
                                        productTypes: catalog.products.reduce(into: [:]) { $0[$1.productID] = $1.type })
            let ownersNow = try await owners.owners(of: purchases, on: connection)
            try await events.finish(watch, affected: Set(ownersNow.values).union(transfers.map(\.from)), cause: { user in
                if let moved = transfers.first(where: { $0.to == user }) { return .transferredIn(from: moved.from) }
                if let moved = transfers.first(where: { $0.from == user }) { return .transferredOut(to: moved.to) }
                return .appStore(report)
            }, on: connection)
            return RecordedPurchases(transferredFrom: Array(Set(transfers.map(\.from))).sorted(), newTransactions: inserted.count)
        }
    }

    /// Every user a recording of `transactions` may change, locking the purchases' owner rows first: their owners
    /// now, the buyers of orders their `app_account_token`s name, and the poster.
    private func usersConcerned(_ transactions: [StoreTransaction], purchases: [String], context: Context,
                                on connection: PostgresConnection) async throws -> Set<String> {
        var users: Set<String> = [context.poster]
        users.formUnion(try await owners.owners(of: purchases, locking: true, on: connection).values)
        let tokens = Set(transactions.compactMap(\.orderToken))
        if !tokens.isEmpty { users.formUnion(try await orders.buyers(of: Array(tokens), on: connection).values) }
        return users
    }

    /// Decides and applies the owner of every purchase in the receipt; returns the moves made.
    private func applyOwnership(_ transactions: [StoreTransaction], catalog: Catalog, context: Context,
                                on connection: PostgresConnection) async throws -> [(from: String, to: String)] {
        let tokens = Set(transactions.compactMap(\.orderToken))
        let buyers = tokens.isEmpty ? [:] : try await orders.buyers(of: Array(tokens), on: connection)
        var purchases: [String: (orderUser: String?, consumable: Bool)] = [:]
        for transaction in transactions {
            let orderUser = transaction.orderToken.flatMap { buyers[$0] }
            let consumable = catalog.product(transaction.productID)?.type == .consumable
            let known = purchases[transaction.originalTransactionID]
            purchases[transaction.originalTransactionID] = (known?.orderUser ?? orderUser, consumable)
        }
        guard !purchases.isEmpty else { return [] }

        // Claim what nobody owns yet; the unique key settles concurrent claims.
        try await owners.claimUnowned(purchases.mapValues { $0.orderUser ?? context.poster }, on: connection)
        guard context.movesOwnership else { return [] }
        let current = try await owners.owners(of: purchases.keys.sorted(), locking: true, on: connection)

        var transfers: [(from: String, to: String)] = []
        for (id, owner) in current.sorted(by: { $0.key < $1.key }) {
            guard let purchase = purchases[id], !purchase.consumable else { continue }  // credits stay where they were made
            switch OwnershipRules.decide(currentOwner: owner, poster: context.poster, orderUser: purchase.orderUser,
                                         transferOnRestore: restorePolicy == .transfer) {
            case .claim, .unchanged:
                continue
            case .conflict(let owner, _):
                throw OwnershipConflict(originalTransactionID: id, owner: owner)
            case .transfer(let from, let to):
                try await owners.transfer(id, to: to, on: connection)
                try await AuditStore().record(actor: context.actor, action: .ownershipTransfer, subject: id, userID: to,
                                              before: try PostgresJSON(encoding: ["user_id": from]),
                                              after: try PostgresJSON(encoding: ["user_id": to]), on: connection)
                Log.info("ownership_transfer", ["original_transaction_id": id, "from": from, "to": to])
                transfers.append((from, to))
            }
        }
        return transfers
    }

    /// Marks orders fulfilled: by the `app_account_token` their purchase carries, or by the `order_id` the
    /// client posted with the receipt (the newest matching transaction not bound to another order).
    private func fulfilOrders(_ transactions: [StoreTransaction], context: Context, on connection: PostgresConnection) async throws {
        let byToken = Dictionary(grouping: transactions.filter { $0.orderToken != nil }) { $0.orderToken! }
        for (token, bound) in byToken.sorted(by: { $0.key.uuidString < $1.key.uuidString }) {
            guard let first = bound.min(by: { $0.purchaseDate < $1.purchaseDate }) else { continue }
            try await orders.fulfil(token: token, transactionID: first.transactionID, on: connection)
        }
        guard let orderID = context.orderID,
              let productID = try await orders.lockOpen(orderID, userID: context.poster, on: connection),
              let match = transactions.filter({ $0.productID == productID && $0.appAccountToken == nil })
                .max(by: { $0.purchaseDate < $1.purchaseDate }) else { return }
        try await orders.fulfil(orderID: orderID, transactionID: match.transactionID, on: connection)
    }

    /// Each auto-renewable subscription's view in this receipt: its latest transaction (by expiry, then
    /// purchase), Apple's renewal info, and when the refresher should look next.
    static func subscriptionStates(_ transactions: [StoreTransaction], renewals: [String: RenewalInfo], now: Date) -> [SubscriptionState] {
        Dictionary(grouping: transactions.filter { $0.expiresDate != nil }, by: \.originalTransactionID).compactMap { id, chain in
            guard let latest = chain.max(by: { ($0.expiresDate!, $0.purchaseDate) < ($1.expiresDate!, $1.purchaseDate) }) else { return nil }
            let renewal = renewals[id]
            let next = RefreshSchedule.next(
                expiresAt: latest.expiresDate, willRenew: renewal?.willRenew ?? false,
                inBillingRetry: renewal?.isInBillingRetryPeriod ?? false,
                gracePeriodExpiresAt: renewal?.gracePeriodExpiresDate, now: now)
            return SubscriptionState(originalTransactionID: id, productID: latest.productID, latestExpiresDate: latest.expiresDate,
                                     nextRefreshAt: next, renewal: renewal)
        }
    }

    /// What each consumable transaction credits: the product's amount times the quantity bought.
    static func consumableCredits(_ transactions: [StoreTransaction], catalog: Catalog) -> [ConsumableCredit] {
        transactions.compactMap { transaction in
            guard let product = catalog.product(transaction.productID), product.type == .consumable,
                  let currency = product.currency, let amount = product.amount else { return nil }
            return ConsumableCredit(transactionID: transaction.transactionID, originalTransactionID: transaction.originalTransactionID,
                                    currency: currency, amount: amount * max(1, transaction.quantity))
        }
    }
}

extension StoreTransaction {
    /// The `app_account_token` as the UUID an order's token is; nil when absent or not a UUID (no order has it).
    var orderToken: UUID? { appAccountToken.flatMap(UUID.init(uuidString:)) }
}
