import Foundation

/// A server-side order carried through a purchase by its `app_account_token`.
struct Order: Sendable, Encodable {
    var orderID: UUID
    var userID: String
    var productID: String
    var appAccountToken: UUID
    var status: String
    var transactionID: String?
    var createdAt: Date
    var fulfilledAt: Date?

    enum CodingKeys: String, CodingKey {
        case orderID = "order_id", userID = "user_id", productID = "product_id", appAccountToken = "app_account_token"
        case status, transactionID = "transaction_id", createdAt = "created_at", fulfilledAt = "fulfilled_at"
    }

    /// The ids as the API writes UUIDs: lowercase.
    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(orderID.lowercasedString, forKey: .orderID)
        try container.encode(userID, forKey: .userID)
        try container.encode(productID, forKey: .productID)
        try container.encode(appAccountToken.lowercasedString, forKey: .appAccountToken)
        try container.encode(status, forKey: .status)
        try container.encodeIfPresent(transactionID, forKey: .transactionID)
        try container.encode(createdAt, forKey: .createdAt)
        try container.encodeIfPresent(fulfilledAt, forKey: .fulfilledAt)
    }
}
