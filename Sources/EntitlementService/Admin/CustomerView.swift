import ServiceRuntime
import EntitlementModel
import Foundation

/// `GET /v1/admin/users/{user_id}`: everything support needs to answer "why does (or doesn't) this user have
/// premium?" — the entitlements as GET entitlements shows them, each with every source that claims it (the shown
/// one first, `wins: true`), the balances, the user's App Store transactions and grants, and the user's webhook
/// events newest first with their delivery state. Transactions and events are paged (`next_…_cursor`).
struct CustomerViewBody: Encodable {
    var document: EntitlementsDocument
    var claims: [String: [EntitlementClaim]]
    var transactions: [TransactionBody]
    var nextTransactionsCursor: String?
    var grants: [GrantRecord]
    var events: [JSONValue]
    var nextEventsCursor: String?

    private enum CodingKeys: String, CodingKey {
        case userID = "user_id", asOf = "as_of", entitlements, consumables, unknownProducts = "unknown_products"
        case transactions, nextTransactionsCursor = "next_transactions_cursor", grants, events
        case nextEventsCursor = "next_events_cursor"
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(document.userID, forKey: .userID)
        try container.encode(RFC3339.string(from: document.asOf), forKey: .asOf)
        let entitlements = Dictionary(uniqueKeysWithValues: document.entitlements.map { name, entitlement in
            (name, EntitlementWithSources(entitlement: entitlement, claims: claims[name] ?? []))
        })
        try container.encode(entitlements, forKey: .entitlements)
        try container.encode(document.consumables, forKey: .consumables)
        try container.encode(document.unknownProducts, forKey: .unknownProducts)
        try container.encode(transactions, forKey: .transactions)
        try container.encode(nextTransactionsCursor, forKey: .nextTransactionsCursor)
        try container.encode(grants, forKey: .grants)
        try container.encode(events, forKey: .events)
        try container.encode(nextEventsCursor, forKey: .nextEventsCursor)
    }
}

/// One entitlement as GET entitlements writes it, plus `sources`.
private struct EntitlementWithSources: Encodable {
    var entitlement: Entitlement
    var claims: [EntitlementClaim]

    private enum CodingKeys: String, CodingKey { case sources }

    func encode(to encoder: any Encoder) throws {
        try entitlement.encode(to: encoder)
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(claims.map(SourceBody.init), forKey: .sources)
    }
}

/// One source of an entitlement: `{"source", "product_id"?, "original_transaction_id"?, "transaction_id"?,
/// "grant_id"?, "expires_at", "active", "inactive_reason"?, "wins"}`.
private struct SourceBody: Encodable {
    var claim: EntitlementClaim

    private enum CodingKeys: String, CodingKey {
        case source, productID = "product_id", originalTransactionID = "original_transaction_id"
        case transactionID = "transaction_id", grantID = "grant_id", expiresAt = "expires_at", active
        case inactiveReason = "inactive_reason", wins
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        let entitlement = claim.entitlement
        switch entitlement.source {
        case .appStore(let purchase):
            try container.encode("app_store", forKey: .source)
            try container.encode(purchase.productID, forKey: .productID)
            try container.encode(purchase.originalTransactionID, forKey: .originalTransactionID)
            try container.encode(claim.identity, forKey: .transactionID)
        case .grant(let id, _):
            try container.encode("grant", forKey: .source)
            try container.encode(id, forKey: .grantID)
        }
        try container.encode(entitlement.expiresAt.map(RFC3339.string(from:)), forKey: .expiresAt)
        try container.encode(entitlement.active, forKey: .active)
        try container.encodeIfPresent(entitlement.inactiveReason, forKey: .inactiveReason)
        try container.encode(claim.shown, forKey: .wins)
    }
}

/// Reads and assembles the customer view.
@Loop
struct CustomerView {
    let db: PostgresPool
    let catalog: CatalogCache
    private let snapshots = UserSnapshotStore()
    private let events = EventStore()
    private let grants = GrantStore()

    init(db: PostgresPool, catalog: CatalogCache) {
        self.db = db
        self.catalog = catalog
    }

    /// The view of `userID` at `now`: at most `transactionLimit` transactions after `transactionCursor` and
    /// `eventLimit` events after `eventCursor`, newest first.
    func body(userID: String, now: Date, transactionLimit: Int, transactionCursor: PageCursor?, eventLimit: Int,
              eventCursor: PageCursor?) async throws -> CustomerViewBody {
        let catalog = try await catalog.current()
        let snapshot = try await snapshots.snapshot(of: userID, on: db)
        let document = EntitlementsDocument(userID: userID, report: snapshot.report(catalog: catalog, at: now),
                                            consumables: snapshot.balances)
        let claims = EntitlementEvaluator.claims(transactions: snapshot.transactions, renewals: snapshot.renewals,
                                                 grants: snapshot.grants, catalog: catalog, at: now)

        let newest = snapshot.transactions.sorted { Self.isOlder(Self.key($1), than: Self.key($0)) }
        let older = transactionCursor.map { cursor in
            newest.filter { Self.isOlder(Self.key($0), than: (cursor.number, cursor.id ?? "")) }
        } ?? newest
        let transactions = Array(older.prefix(transactionLimit))
        let nextTransactions = older.count > transactionLimit
            ? transactions.last.map { PageCursor(number: Self.key($0).0, id: $0.transaction.transactionID).text } : nil

        let stored = try await events.events(of: userID, limit: eventLimit + 1, before: eventCursor.map { Int($0.number) }, on: db)
        let page = stored.prefix(eventLimit)
        let eventBodies = try page.map { event -> JSONValue in
            guard case .object(var fields) = try JSONDecoder().decode(JSONValue.self, from: Data(event.payload.utf8)) else {
                return .null
            }
            fields["delivery"] = .string(event.delivery.rawValue)
            return .object(fields)
        }
        let nextEvents = stored.count > eventLimit ? page.last.map { PageCursor(number: Int64($0.sequence)).text } : nil

        return CustomerViewBody(document: document, claims: claims, transactions: transactions.map(TransactionBody.init),
                                nextTransactionsCursor: nextTransactions, grants: try await grants.records(userID: userID, on: db),
                                events: eventBodies, nextEventsCursor: nextEvents)
    }

    /// Newest first: purchase instant (microseconds), then transaction id.
    private static func key(_ owned: OwnedTransaction) -> (Int64, String) {
        (Int64((owned.transaction.purchaseDate.timeIntervalSince1970 * 1_000_000).rounded(.down)), owned.transaction.transactionID)
    }

    /// Whether key `a` sorts before `b`: by instant, then by the id's bytes, as PostgreSQL orders ids (Swift's string
    /// order would take two canonically equivalent ids for one, and a page would skip the second).
    private static func isOlder(_ a: (Int64, String), than b: (Int64, String)) -> Bool {
        a.0 != b.0 ? a.0 < b.0 : a.1.utf8.lexicographicallyPrecedes(b.1.utf8)
    }
}
