import ServiceRuntime
import EntitlementModel
import Foundation

/// A writing transaction changed users it had not watched, so their events would be missing: it rolls back.
/// Writers lock what they change before they watch (purchases by `OwnerStore.lockPurchases`), so this marks a
/// writer that watched too few users, never a race.
struct EventScopeChanged: Error, Sendable {
    var users: Set<String>
}

/// Writes the webhook events of every change to users' entitlements or balances, inside the change's own
/// transaction: the one place every write path goes through.
///
/// A writing transaction calls ``watch(_:now:on:)`` with the users it may change before it changes anything (this
/// holds the catalog, shared, at the revision in force, and locks their heads, so their changes follow one another),
/// makes its change, then calls ``finish(_:affected:cause:on:)``, which evaluates each watched user after the change
/// and writes an event when, and only when, what GET entitlements answers for them (entitlements and consumables, as
/// written) differs from what the user's last write left; the event's type comes from the model's
/// `DerivedEntitlementEvent.derive`. A change made since then without a write to the user (an end passed, or a
/// catalog change marked on their head, not yet seen by the ``ExpirationWorker``) is written first, as its own
/// `expiration` or `catalog_change` event. Users are evaluated with the catalog
/// the transaction holds (``Watch/catalog``), never a cached copy a concurrent catalog change is replacing.
@Loop
struct EventRecorder {
    let catalog: CatalogCache
    /// True when `WEBHOOK_URL` is set: events are written `pending`; otherwise `none` (recorded, never sent).
    let delivers: Bool
    private let events = EventStore()
    private let snapshots = UserSnapshotStore()
    private let products = ProductStore()

    init(catalog: CatalogCache, delivers: Bool) {
        self.catalog = catalog
        self.delivers = delivers
    }

    /// The users a transaction is about to change, locked, with what each held before the change.
    struct Watch {
        /// What the users are evaluated with: the catalog the transaction holds.
        var catalog: Catalog
        var now: Date
        var heads: [String: EventHead]
        var before: [String: EntitlementState]
    }

    /// Holds the catalog (shared), then locks the heads of `users` and reads what each holds before the change
    /// (their last written state, or, for a user never written or one whose state time has changed since, an
    /// evaluation at the watch's `now`). A transaction that changes nothing after all may end without
    /// ``finish(_:affected:cause:on:)``.
    ///
    /// The watch's `now` is read once the locks are held: a writer that held one of these heads before committed
    /// a change stamped by its own clock, which is then in the past of this one's however long the locks took,
    /// so the users' events follow the order of their changes (in time as in `sequence`).
    func watch(_ users: Set<String>, on connection: PostgresConnection) async throws -> Watch {
        let catalog = try await heldCatalog(on: connection)
        let locked = try await events.lockHeads(Array(users), on: connection)
        let now = Date()
        var watch = Watch(catalog: catalog, now: now, heads: [:], before: [:])
        var stale: [EventHead] = []
        for head in locked {
            if let state = head.state, head.nextChangeAt.map({ $0 > now }) ?? true {
                watch.before[head.userID] = state
                watch.heads[head.userID] = head
            } else {
                stale.append(head)
            }
        }
        // Stored at once: a transaction that ends up changing nothing need not call `finish`.
        for head in try await bringUpToDate(stale, catalog: catalog, now: now, on: connection) {
            watch.before[head.userID] = head.state
            watch.heads[head.userID] = head
        }
        return watch
    }

    /// Evaluates every watched user after the change, writes the events due (`cause` names each user's cause)
    /// and stores each head's new state and next change. Returns the events written.
    /// - Throws: `EventScopeChanged` when `affected` names users the watch does not hold; nothing was written.
    @discardableResult
    func finish(_ watch: Watch, affected: Set<String> = [], cause: (String) -> EntitlementChangeCause,
                on connection: PostgresConnection) async throws -> [WebhookEvent] {
        let missing = affected.subtracting(watch.heads.keys)
        guard missing.isEmpty else { throw EventScopeChanged(users: missing) }
        let heads = watch.heads.values.sorted { $0.userID < $1.userID }
        let evaluated = try await evaluate(heads.map(\.userID), catalog: watch.catalog, now: watch.now, on: connection)
        return try await record(zip(heads, evaluated).map { head, after in
            (head, before: watch.before[head.userID], after: (after.state, after.nextChange), cause: cause(head.userID))
        }, now: watch.now, on: connection).events
    }

    /// Writes the changes time alone or a catalog change made for up to `limit` users whose next change is due at
    /// `now` (heads claimed with SKIP LOCKED: another instance's worker or a writer holding one takes it); returns
    /// how many it took.
    func catchUp(limit: Int, now: Date, on connection: PostgresConnection) async throws -> Int {
        let catalog = try await heldCatalog(on: connection)
        let heads = try await events.claimDueHeads(limit: limit, now: now, on: connection)
        return try await bringUpToDate(heads, catalog: catalog, now: now, on: connection).count
    }

    /// Evaluates the users of `heads` (locked, due) at `now`, their snapshots read in one round trip, writes the
    /// event of each whose state changed since it was written (named by ``pendingCause(_:)``) and stores each
    /// head's new state and next change; returns the heads as stored.
    private func bringUpToDate(_ heads: [EventHead], catalog: Catalog, now: Date,
                               on connection: PostgresConnection) async throws -> [EventHead] {
        let evaluated = try await evaluate(heads.map(\.userID), catalog: catalog, now: now, on: connection)
        return try await record(zip(heads, evaluated).map { head, current in
            (head, before: head.state, after: (current.state, current.nextChange),
             cause: Self.pendingCause(head, transactions: current.transactions.filter { $0.transaction.purchaseDate <= now }))
        }, now: now, on: connection).heads
    }

    /// For each head: the event its change from `before` to `after` calls for, if any, as the head's next sequence
    /// (a user with no recorded state has no `before`: their first state is recorded without one), then the head
    /// with its new state and next change; all events in one statement, all heads in another.
    private func record(_ changes: [(head: EventHead, before: EntitlementState?, after: (state: EntitlementState, nextChange: Date?),
                                     cause: EntitlementChangeCause)],
                        now: Date, on connection: PostgresConnection) async throws -> (events: [WebhookEvent], heads: [EventHead]) {
        var written: [(event: WebhookEvent, payload: String)] = []
        var heads: [EventHead] = []
        for (head, before, after, cause) in changes {
            var head = head
            if let before, let change = DerivedEntitlementEvent.derive(before: before, after: after.state, cause: cause) {
                head.lastSequence += 1
                let event = WebhookEvent(id: UUID(), userID: head.userID, sequence: head.lastSequence, createdAt: now, change: change,
                                         state: after.state)
                written.append((event, String(decoding: try event.body(), as: UTF8.self)))
            }
            head.state = after.state
            head.nextChangeAt = after.nextChange
            head.pendingCatalogChange = nil
            heads.append(head)
        }
        try await events.insert(written, delivery: delivers ? .pending : .none, on: connection)
        try await events.updateHeads(heads, on: connection)
        return (written.map(\.event), heads)
    }

    /// What changed a due head's user since their state was written: a catalog change marked on it
    /// (``CatalogEditor``), else time alone (with the user's `transactions` bought by now).
    private static func pendingCause(_ head: EventHead, transactions: [OwnedTransaction]) -> EntitlementChangeCause {
        head.pendingCatalogChange.map { .catalogChanged(productID: $0.isEmpty ? nil : $0) } ?? .timePassed(transactions: transactions)
    }

    /// The catalog in force, held (shared) until the transaction ends: taken before any head, as a catalog change
    /// takes it (exclusively) before the heads of the product's owners.
    private func heldCatalog(on connection: PostgresConnection) async throws -> Catalog {
        try await catalog.catalog(atRevision: try await products.holdCatalog(on: connection), on: connection)
    }

    /// What each of `userIDs` (which differ) holds at `now` as GET entitlements shows it, when that next
    /// changes with time alone, and their transactions, in their order: their snapshots read in one round trip.
    private func evaluate(_ userIDs: [String], catalog: Catalog, now: Date, on connection: PostgresConnection) async throws
        -> [(state: EntitlementState, nextChange: Date?, transactions: [OwnedTransaction])] {
        try await snapshots.snapshots(of: userIDs, within: connection).map { snapshot in
            let report = snapshot.report(catalog: catalog, at: now)
            return (EntitlementState(entitlements: report.entitlements, consumables: snapshot.balances).asWritten, report.nextChange,
                    snapshot.transactions)
        }
    }
}
