import AppStore
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

/// What the steps of a recording did over one database transaction (a report and the parked notifications it
/// unparked), for the answer and the webhook events.
struct RecordingEffects: Sendable {
    /// Every transaction recorded, with the environment that reported it.
    var transactions: [OwnedTransaction]
    /// Those stored for the first time.
    var newTransactionIDs: Set<String> = []
    /// Consumables whose refund this recording credited back (Apple reversed it).
    var reversedTransactionIDs: Set<String> = []
    /// Purchases moved between users, in purchase order.
    var transfers: [(from: String, to: String, originalTransactionID: String)] = []

    mutating func add(_ other: RecordingEffects) {
        transactions += other.transactions
        newTransactionIDs.formUnion(other.newTransactionIDs)
        reversedTransactionIDs.formUnion(other.reversedTransactionIDs)
        transfers += other.transfers
    }
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
/// orders' `app_account_token`, subscription renewal state, consumable credits once per transaction and refund
/// debits and their reversals once per refund cycle, order fulfilment, audit events for transfers, and the
/// submission marked verified.
///
/// Every "once" rests on a unique key of the schema, so concurrent recordings of the same receipt cannot
/// count anything twice; a conflict under `keep` rolls everything back. The decisions are made here; the
/// stores run the statements. Each recording first locks its purchases (`OwnerStore.lockPurchases`), as every
/// application of a notification does, so that a purchase that gets its first owner here has its parked
/// notifications applied in the same transaction and none is parked meanwhile; with the purchases locked, their
/// owners cannot change under it, so the users it may change are known before it changes anything. Their webhook
/// events (the purchases' owners, the poster, the users of the tokens the transactions carry, both sides of a
/// transfer) are written in the same transaction.
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
    let tokens = AppAccountTokenStore()
    let notifications = NotificationStore()

    /// Who posted, and under which submission (nil for Apple's reports).
    struct Context: Sendable {
        var poster: String
        /// True for a user's own post: the restore policy may move purchases to the poster (or refuse with a
        /// conflict). False for Apple's reports (notifications, renewal refreshes), recorded for whoever owns
        /// each purchase when the transaction runs (a transfer that committed since the owner was looked up
        /// stands), except that a purchase carrying an issued `app_account_token` moves to that token's user.
        var movesOwnership: Bool
        var actor: String
        /// The lease of the posted submission being verified; the recording happens only while it holds.
        var claim: SubmissionClaim?
        var orderID: UUID?
        /// The App Store order ID an admin attached these purchases by (`POST /v1/admin/users/{user_id}/apple-orders`):
        /// the recording is audited as `apple_order.attach` in its transaction.
        var appleOrderID: String? = nil
        /// When the poster posted what is recorded (nil: now); for a submission, read from it when recording (its
        /// user's latest post of it). A purchase another user came to own after that keeps its owner: the newer
        /// restore stands.
        var postedAt: Date? = nil
    }

    /// The `after` of an `apple_order.attach` audit event.
    private struct AttachedOrder: Encodable {
        var environment: StoreEnvironment
        var transactionIDs: [String]
        enum CodingKeys: String, CodingKey { case environment, transactionIDs = "transaction_ids" }
    }

    func record(_ response: AppStoreResponse, environment: StoreEnvironment, context: Context) async throws -> RecordedPurchases {
        try await record(transactions: response.transactions(), renewals: response.renewalInfo(), latestReceipt: response.latestReceipt,
                         appleStatus: response.status, environment: environment, context: context)
    }

    /// Records what Apple said about some purchases, from a verifyReceipt answer, signed transactions or a renewal
    /// refresh, in one database transaction.
    /// - Throws: `OwnershipConflict` under `keep`; `ClaimSuperseded` when the context's lease no longer holds.
    func record(transactions: [StoreTransaction], renewals: [RenewalInfo], latestReceipt: String?, appleStatus: Int,
                environment: StoreEnvironment, context: Context) async throws -> RecordedPurchases {
        var context = context
        let effects = try await db.transaction { connection in
            if let claim = context.claim {
                guard let submission = try await submissions.lockForRecording(claim, on: connection) else {
                    throw ClaimSuperseded(verificationID: claim.verificationID)
                }
                context.postedAt = submission.postedAt
                context.orderID = submission.orderID ?? context.orderID
            }
            let purchases = transactions.map(\.originalTransactionID) + renewals.map(\.originalTransactionID)
            try await owners.lockPurchases(purchases, on: connection)
            let watch = try await events.watch(
                try await usersConcerned(purchases: purchases, tokens: transactions.compactMap(\.accountToken), poster: context.poster,
                                         on: connection),
                on: connection)
            let effects = try await record(transactions: transactions, renewals: renewals, latestReceipt: latestReceipt,
                                           environment: environment, catalog: watch.catalog, context: context, on: connection)
            if let claim = context.claim {
                try await submissions.markVerified(claim, appleStatus: appleStatus, environment: environment, on: connection)
            }
            if let appleOrderID = context.appleOrderID {
                let after = AttachedOrder(environment: environment, transactionIDs: transactions.map(\.transactionID).sorted())
                try await AuditStore().record(actor: context.actor, action: .appleOrderAttach, subject: appleOrderID, userID: context.poster,
                                              before: nil, after: try PostgresJSON(encoding: after), on: connection)
            }
            try await finishEvents(watch, effects, report: nil, on: connection)
            return effects
        }
        return RecordedPurchases(transferredFrom: Array(Set(effects.transfers.map(\.from))).sorted(),
                                 newTransactions: effects.newTransactionIDs.count)
    }

    /// The steps of a recording, in the caller's transaction, which holds the locks of these purchases and watches
    /// the users they may change (``usersConcerned(purchases:tokens:poster:on:)``). Purchases that get their first
    /// owner here have their parked notifications applied too, oldest signed first.
    func record(transactions: [StoreTransaction], renewals renewalList: [RenewalInfo], latestReceipt: String?,
                environment: StoreEnvironment, catalog: Catalog, context: Context,
                on connection: PostgresConnection) async throws -> RecordingEffects {
        let renewals = Dictionary(renewalList.map { ($0.originalTransactionID, $0) }) { _, last in last }
        let credits = Self.consumableCredits(transactions, catalog: catalog)
        var effects = RecordingEffects(transactions: transactions.map { OwnedTransaction($0, environment: environment) })
        effects.newTransactionIDs = try await transactionStore.record(transactions, environment: environment,
                                                                      firstVerificationID: context.claim?.verificationID, on: connection)
        let (transfers, claimed) = try await applyOwnership(transactions, catalog: catalog, context: context, on: connection)
        effects.transfers = transfers
        let states = Self.subscriptionStates(transactions, renewals: renewals, fromReceipt: latestReceipt != nil, now: Date())
        try await subscriptions.record(states, latestReceipt: latestReceipt, environment: environment, on: connection)
        try await ledger.credit(credits, on: connection)
        // Every transaction, not only those the catalog now credits: a credit made while the product was a consumable
        // is taken back by its refund even if the catalog has changed the product since.
        effects.reversedTransactionIDs = try await ledger.settleRefunds(transactions.map(\.transactionID), on: connection)
        try await fulfilOrders(transactions, context: context, on: connection)
        for id in claimed {
            effects.add(try await applyParked(of: id, catalog: catalog, on: connection))
        }
        return effects
    }

    /// Every user a recording about `purchases` may change, known before it changes anything because the caller
    /// holds the purchases' locks: their owners now, the users of the `app_account_token`s the transactions carry
    /// (a user's own, an order's buyer), and the poster.
    func usersConcerned(purchases: [String], tokens: [UUID], poster: String?, on connection: PostgresConnection) async throws -> Set<String> {
        var users = Set(poster.map { [$0] } ?? [])
        users.formUnion(try await owners.owners(of: Set(purchases).sorted(), on: connection).values)
        if !tokens.isEmpty { users.formUnion(try await self.tokens.users(of: Set(tokens), on: connection).values) }
        return users
    }

    /// Writes the webhook events of a recording's users: both sides of each transfer by it, the others by Apple's
    /// report (`report` names the notification, when one was applied).
    func finishEvents(_ watch: EventRecorder.Watch, _ effects: RecordingEffects, report notification: StoredNotification?,
                      on connection: PostgresConnection) async throws {
        let purchases = Set(effects.transactions.map(\.transaction.originalTransactionID)).sorted()
        let ownersNow = try await owners.owners(of: purchases, on: connection)
        // The users are evaluated at `watch.now`: a transaction bought after it (a renewal recorded ahead) is not the
        // one an event of now names; its own event comes when its period starts.
        let report = AppStoreReport(transactions: effects.transactions.filter { $0.transaction.purchaseDate <= watch.now },
                                    newTransactionIDs: effects.newTransactionIDs, reversedTransactionIDs: effects.reversedTransactionIDs,
                                    notificationType: notification?.type, subtype: notification?.subtype,
                                    productTypes: watch.catalog.products.reduce(into: [:]) { $0[$1.productID] = $1.type })
        try await events.finish(watch, affected: Set(ownersNow.values).union(effects.transfers.map(\.from)), cause: { user in
            let movedIn = effects.transfers.filter { $0.to == user }, movedOut = effects.transfers.filter { $0.from == user }
            if !movedIn.isEmpty { return .transferredIn(from: Self.byPurchase(movedIn.map { ($0.originalTransactionID, $0.from) }), report: report) }
            if !movedOut.isEmpty { return .transferredOut(to: Self.byPurchase(movedOut.map { ($0.originalTransactionID, $0.to) }), report: report) }
            return .appStore(report)
        }, on: connection)
    }

    /// The user each purchase (by original transaction id) moved from or to: the last move of a purchase counts.
    private static func byPurchase(_ moves: [(String, String)]) -> [String: String] {
        Dictionary(moves) { _, last in last }
    }

    /// Decides and applies the owner of every purchase in the receipt; returns the moves made and the purchases
    /// that got their first owner.
    ///
    /// A purchase carrying an `app_account_token` this service issued (a user's, or an order's) belongs to that
    /// token's user, whoever posts it, and whoever owns it when Apple reports it (a notification, a refresh).
    private func applyOwnership(_ transactions: [StoreTransaction], catalog: Catalog, context: Context,
                                on connection: PostgresConnection) async throws -> (transfers: [(from: String, to: String, originalTransactionID: String)], claimed: [String]) {
        let buyers = try await tokens.users(of: Set(transactions.compactMap(\.accountToken)), on: connection)
        var purchases: [String: (orderUser: String?, consumable: Bool)] = [:]
        for transaction in transactions {
            let orderUser = transaction.accountToken.flatMap { buyers[$0] }
            let consumable = catalog.product(transaction.productID)?.type == .consumable
            let known = purchases[transaction.originalTransactionID]
            purchases[transaction.originalTransactionID] = (known?.orderUser ?? orderUser, consumable)
        }
        guard !purchases.isEmpty else { return ([], []) }

        // Claim what nobody owns yet; the unique key settles concurrent claims.
        let claimed = try await owners.claimUnowned(purchases.mapValues { $0.orderUser ?? context.poster }, postedAt: context.postedAt,
                                                    on: connection)
        // Apple's reports move only what an issued token binds to its user; a user's post may move anything.
        let movable = context.movesOwnership ? Array(purchases.keys) : purchases.filter { $0.value.orderUser != nil }.map(\.key)
        guard !movable.isEmpty else { return ([], claimed) }
        let current = try await owners.lockedOwners(of: movable.sorted(), on: connection)

        var transfers: [(from: String, to: String, originalTransactionID: String)] = []
        var repostedByOwner: [String] = []
        for (id, (owner, since)) in current.sorted(by: { $0.key < $1.key }) {
            guard let purchase = purchases[id] else { continue }
            let poster = context.movesOwnership ? context.poster : owner
            switch OwnershipRules.decide(currentOwner: owner, ownerSince: since, poster: poster,
                                         postedAt: context.movesOwnership ? context.postedAt ?? Date() : nil,
                                         orderUser: purchase.orderUser, consumable: purchase.consumable,
                                         transferOnRestore: restorePolicy == .transfer) {
            case .claim, .unchanged:
                continue
            case .reclaimed:
                repostedByOwner.append(id)
            case .kept(let owner, let poster):
                if !purchase.consumable {
                    Log.info("ownership_kept", ["original_transaction_id": id, "owner": owner, "poster": poster, "reason": "newer_claim"])
                }
            case .conflict(let owner, _):
                throw OwnershipConflict(originalTransactionID: id, owner: owner)
            case .transfer(let from, let to):
                try await owners.transfer(id, to: to, postedAt: context.postedAt, on: connection)
                try await AuditStore().record(actor: context.actor, action: .ownershipTransfer, subject: id, userID: to,
                                              before: try PostgresJSON(encoding: ["user_id": from]),
                                              after: try PostgresJSON(encoding: ["user_id": to]), on: connection)
                Log.info("ownership_transfer", ["original_transaction_id": id, "from": from, "to": to])
                transfers.append((from, to, id))
            }
        }
        try await owners.renewClaims(repostedByOwner, postedAt: context.postedAt, on: connection)
        return (transfers, claimed)
    }

    /// Marks orders fulfilled: by the `app_account_token` their purchase carries (its first purchase of the order's
    /// product), or by the `order_id` the client posted with the receipt (the newest matching transaction bought
    /// since the order was made and not carrying another order's token; the user's own token is no order's).
    private func fulfilOrders(_ transactions: [StoreTransaction], context: Context, on connection: PostgresConnection) async throws {
        let byToken = Dictionary(grouping: transactions.filter { $0.accountToken != nil }) { $0.accountToken! }
        for (token, bound) in byToken.sorted(by: { $0.key.uuidString < $1.key.uuidString }) {
            let oldestFirst = bound.sorted { $0.wasBought(before: $1) }
            try await orders.fulfil(token: token, candidates: oldestFirst.map { ($0.transactionID, $0.productID) }, on: connection)
        }
        guard let orderID = context.orderID,
              let open = try await orders.lockOpen(orderID, userID: context.poster, on: connection) else { return }
        let ordersTokens = try await orders.orderTokens(among: Set(byToken.keys), on: connection)
        // Bought for the order: not before it was made (less a minute, for Apple's clock and ours).
        let since = open.createdAt.addingTimeInterval(-Self.orderClockSkew)
        guard let match = transactions.filter({
            $0.productID == open.productID && $0.purchaseDate >= since && !($0.accountToken.map(ordersTokens.contains) ?? false)
        }).max(by: { $0.purchaseDate < $1.purchaseDate }) else { return }
        try await orders.fulfil(orderID: orderID, transactionID: match.transactionID, on: connection)
    }

    /// How far Apple's clock may be behind ours when a purchase made for an order is dated before the order.
    static let orderClockSkew: TimeInterval = 60

    /// Each auto-renewable subscription's view in this receipt: its latest transaction (by expiry, then
    /// purchase), Apple's renewal info, and when the refresher should look next. Renewal state is not part of a
    /// signed transaction: a subscription stated without renewal info and without a receipt is due at once, so the
    /// renewal refresher asks Apple for its status (Get All Subscription Statuses, with an App Store Server API key).
    /// An Xcode or LocalTesting subscription is never due: no App Store knows it.
    static func subscriptionStates(_ transactions: [StoreTransaction], renewals: [String: RenewalInfo], fromReceipt: Bool,
                                   now: Date) -> [SubscriptionState] {
        Dictionary(grouping: transactions.filter { $0.expiresDate != nil }, by: \.originalTransactionID).compactMap { id, chain in
            guard let latest = chain.max(by: { ($0.expiresDate!, $0.purchaseDate) < ($1.expiresDate!, $1.purchaseDate) }) else { return nil }
            let renewal = renewals[id]
            let next = !SignedDataEnvironment.isAppStoreID(id) ? nil : renewal == nil && !fromReceipt ? now : RefreshSchedule.next(
                expiresAt: latest.expiresDate, willRenew: renewal?.willRenew ?? false,
                inBillingRetry: renewal?.isInBillingRetryPeriod ?? false,
                gracePeriodExpiresAt: renewal?.gracePeriodExpiresDate, now: now)
            return SubscriptionState(originalTransactionID: id, productID: latest.productID, latestExpiresDate: latest.expiresDate,
                                     nextRefreshAt: next, renewal: renewal,
                                     assumedRenewing: renewal == nil && !fromReceipt && latest.expiresDate! > now && latest.cancellationDate == nil,
                                     wantsStatus: renewal == nil && !fromReceipt)
        }
    }

    /// What each consumable transaction credits: the product's amount times the quantity bought. A credit past
    /// ``ConsumableCredit/maximum`` (a quantity no store sells) is left out and logged, rather than trapping or
    /// overflowing the balance.
    static func consumableCredits(_ transactions: [StoreTransaction], catalog: Catalog) -> [ConsumableCredit] {
        transactions.compactMap { transaction in
            guard let product = catalog.product(transaction.productID), product.type == .consumable,
                  let currency = product.currency, let amount = product.amount else { return nil }
            let (credit, overflow) = amount.multipliedReportingOverflow(by: max(1, transaction.quantity))
            guard !overflow, credit <= ConsumableCredit.maximum else {
                Log.error("consumable_credit_refused", ["transaction_id": transaction.transactionID, "product_id": transaction.productID,
                                                        "amount": amount, "quantity": transaction.quantity])
                return nil
            }
            return ConsumableCredit(transactionID: transaction.transactionID, originalTransactionID: transaction.originalTransactionID,
                                    currency: currency, amount: credit)
        }
    }
}

extension StoreTransaction {
    /// The `app_account_token` as a UUID (compared case-insensitively); nil when absent or not a UUID, which no
    /// token this service issues (a user's or an order's) is.
    var accountToken: UUID? { appAccountToken.flatMap(UUID.exactly) }
}
