import ServiceRuntime
import Foundation

/// A server-side order carried through a purchase by its `app_account_token`.
struct Order: Sendable, Encodable {
    var orderID: String
    var userID: String
    var productID: String
    var appAccountToken: String
    var status: String
    var transactionID: String?
    var createdAt: Date
    var fulfilledAt: Date?

    enum CodingKeys: String, CodingKey {
        case orderID = "order_id", userID = "user_id", productID = "product_id", appAccountToken = "app_account_token"
        case status, transactionID = "transaction_id", createdAt = "created_at", fulfilledAt = "fulfilled_at"
    }

    static let columns = """
        order_id::text AS order_id, user_id, product_id, app_account_token::text AS app_account_token, status,
        transaction_id, created_at, fulfilled_at
        """

    init(row: PostgresRow) throws {
        orderID = try row.string("order_id")
        userID = try row.string("user_id")
        productID = try row.string("product_id")
        appAccountToken = try row.string("app_account_token")
        status = try row.string("status")
        transactionID = try row.optionalString("transaction_id")
        createdAt = try row.date("created_at")
        fulfilledAt = try row.optionalDate("fulfilled_at")
    }
}

/// The `orders` table.
@Loop
struct OrderStore {
    let db: PostgresPool

    func create(userID: String, productID: String) async throws -> Order {
        try Order(row: try await db.query(
            "INSERT INTO orders (user_id, product_id) VALUES ($1, $2) RETURNING \(Order.columns)", [userID, productID]).single())
    }

    func find(_ orderID: String) async throws -> Order? {
        try await db.query("SELECT \(Order.columns) FROM orders WHERE order_id = $1::uuid", [orderID]).rows.first.map(Order.init(row:))
    }
}
