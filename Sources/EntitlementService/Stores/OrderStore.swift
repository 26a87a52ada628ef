import ServiceRuntime
import Foundation

/// The `orders` table: server-side orders, whose `app_account_token` binds a purchase to the order's user.
@Loop
struct OrderStore {
    private static let columns = "order_id, user_id, product_id, app_account_token, status, transaction_id, created_at, fulfilled_at"

    /// A new order of `productID` for `userID`, with a fresh token.
    func create(userID: String, productID: String, on db: some PostgresQueryable) async throws -> Order {
        try Self.order(try await db.query(
            "INSERT INTO orders (user_id, product_id) VALUES ($1, $2) RETURNING \(Self.columns)", [userID, productID]).single())
    }

    /// The order with this id, if any.
    func find(_ orderID: UUID, on db: some PostgresQueryable) async throws -> Order? {
        try await db.query("SELECT \(Self.columns) FROM orders WHERE order_id = $1", [orderID]).rows.first.map(Self.order)
    }

    /// Fulfils the open order whose token `candidates` carried with the first of them (oldest first) that is of the
    /// order's product and not another order's already: a purchase of another product does not fulfil it.
    func fulfil(token: UUID, candidates: [(transactionID: String, productID: String)], on db: some PostgresQueryable) async throws {
        _ = try await db.query("""
            WITH target AS (
                SELECT order_id, product_id FROM orders WHERE app_account_token = $1 AND status = 'created' FOR UPDATE),
            pick AS (
                SELECT c.transaction_id FROM target, unnest($2::text[], $3::text[]) WITH ORDINALITY AS c (transaction_id, product_id, n)
                 WHERE c.product_id = target.product_id AND NOT EXISTS (SELECT 1 FROM orders o WHERE o.transaction_id = c.transaction_id)
                 ORDER BY c.n LIMIT 1)
            UPDATE orders SET status = 'fulfilled', transaction_id = pick.transaction_id, fulfilled_at = now()
              FROM target, pick WHERE orders.order_id = target.order_id
            """, [token, candidates.map(\.transactionID), candidates.map(\.productID)])
    }

    /// Which of `tokens` are orders' tokens (rather than users' own, or none this service issued).
    func orderTokens(among tokens: Set<UUID>, on db: some PostgresQueryable) async throws -> Set<UUID> {
        guard !tokens.isEmpty else { return [] }
        return Set(try await db.query("SELECT app_account_token FROM orders WHERE app_account_token = ANY($1)", [Array(tokens)])
            .rows.map { try $0.uuid("app_account_token") })
    }

    /// The product and creation time of `userID`'s open order `orderID`, locked until the caller's transaction
    /// ends; nil when the user has no such open order.
    func lockOpen(_ orderID: UUID, userID: String, on db: some PostgresQueryable) async throws -> (productID: String, createdAt: Date)? {
        try await db.query("""
            SELECT product_id, created_at FROM orders WHERE order_id = $1 AND user_id = $2 AND status = 'created' FOR UPDATE
            """, [orderID, userID]).rows.first.map { (try $0.string("product_id"), try $0.date("created_at")) }
    }

    /// Fulfils open order `orderID` with `transactionID`, unless an order already has it.
    func fulfil(orderID: UUID, transactionID: String, on db: some PostgresQueryable) async throws {
        _ = try await db.query("""
            UPDATE orders SET status = 'fulfilled', transaction_id = $2, fulfilled_at = now()
             WHERE order_id = $1 AND status = 'created' AND NOT EXISTS (SELECT 1 FROM orders WHERE transaction_id = $2)
            """, [orderID, transactionID])
    }

    private static func order(_ row: PostgresRow) throws -> Order {
        Order(orderID: try row.uuid("order_id"), userID: try row.string("user_id"), productID: try row.string("product_id"),
              appAccountToken: try row.uuid("app_account_token"), status: try row.string("status"),
              transactionID: try row.optionalString("transaction_id"), createdAt: try row.date("created_at"),
              fulfilledAt: try row.optionalDate("fulfilled_at"))
    }
}
