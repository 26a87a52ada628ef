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

    /// The buyer of each order among `tokens` (app account tokens) that has one.
    func buyers(of tokens: [UUID], on db: some PostgresQueryable) async throws -> [UUID: String] {
        var buyers: [UUID: String] = [:]
        for row in try await db.query("SELECT app_account_token, user_id FROM orders WHERE app_account_token = ANY($1)", [tokens]).rows {
            buyers[try row.uuid("app_account_token")] = try row.string("user_id")
        }
        return buyers
    }

    /// Fulfils the open order whose purchase carried `token` with `transactionID`, unless an order already has it.
    func fulfil(token: UUID, transactionID: String, on db: some PostgresQueryable) async throws {
        _ = try await db.query("""
            UPDATE orders SET status = 'fulfilled', transaction_id = $2, fulfilled_at = now()
             WHERE app_account_token = $1 AND status = 'created'
               AND NOT EXISTS (SELECT 1 FROM orders WHERE transaction_id = $2)
            """, [token, transactionID])
    }

    /// The product of `userID`'s open order `orderID`, locked until the caller's transaction ends; nil when the
    /// user has no such open order.
    func lockOpen(_ orderID: UUID, userID: String, on db: some PostgresQueryable) async throws -> String? {
        try await db.query("""
            SELECT product_id FROM orders WHERE order_id = $1 AND user_id = $2 AND status = 'created' FOR UPDATE
            """, [orderID, userID]).rows.first.map { try $0.string("product_id") }
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
