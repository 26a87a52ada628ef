import Foundation

/// One webhook event as it is sent and kept: `{"id", "type", "created_at", "user_id", "sequence",
/// "environment"?, "product_id"?, "transaction_id"?, "original_transaction_id"?, "transferred_from"?,
/// "transferred_to"?, "entitlements", "consumables"}`, the fields that do not apply to the type left out and
/// the user's state as it stands after the change.
public struct WebhookEvent: Sendable, Hashable, Encodable {
    /// `id`, written as a lowercase UUID; the same in every delivery attempt.
    public var id: UUID
    /// `user_id`: the user whose state changed.
    public var userID: String
    /// Grows by one per user with each event (1 for a user's first).
    public var sequence: Int
    /// `created_at` (RFC 3339): when the change was recorded.
    public var createdAt: Date
    /// The type and the purchase the change is about.
    public var change: DerivedEntitlementEvent
    /// What the user holds after the change.
    public var state: EntitlementState

    /// An event with these values; nothing is checked (`sequence` should be the user's next).
    public init(id: UUID, userID: String, sequence: Int, createdAt: Date, change: DerivedEntitlementEvent,
                state: EntitlementState) {
        self.id = id
        self.userID = userID
        self.sequence = sequence
        self.createdAt = createdAt
        self.change = change
        self.state = state
    }

    private enum CodingKeys: String, CodingKey {
        case id, type
        case createdAt = "created_at"
        case userID = "user_id"
        case sequence, environment
        case productID = "product_id"
        case transactionID = "transaction_id"
        case originalTransactionID = "original_transaction_id"
        case transferredFrom = "transferred_from"
        case transferredTo = "transferred_to"
        case entitlements, consumables
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(id.uuidString.lowercased(), forKey: .id)
        try container.encode(change.type, forKey: .type)
        try container.encode(RFC3339.string(from: createdAt), forKey: .createdAt)
        try container.encode(userID, forKey: .userID)
        try container.encode(sequence, forKey: .sequence)
        try container.encodeIfPresent(change.environment, forKey: .environment)
        try container.encodeIfPresent(change.productID, forKey: .productID)
        try container.encodeIfPresent(change.transactionID, forKey: .transactionID)
        try container.encodeIfPresent(change.originalTransactionID, forKey: .originalTransactionID)
        try container.encodeIfPresent(change.transferredFrom, forKey: .transferredFrom)
        try container.encodeIfPresent(change.transferredTo, forKey: .transferredTo)
        try container.encode(state.entitlements, forKey: .entitlements)
        try container.encode(state.consumables, forKey: .consumables)
    }

    /// The bytes sent (and kept) for this event: JSON with sorted keys, so the same event is always the same body.
    public func body() throws -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return Array(try encoder.encode(self))
    }
}
