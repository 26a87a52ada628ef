import Foundation

/// An entitlement an admin gave a user by hand.
///
/// Codable as the API's grant document: `{"grant_id", "user_id", "entitlement", "created_at", "expires_at",
/// "revoked_at", "reason"}` with RFC 3339 times; `expires_at` is `null` for a lifetime grant and `revoked_at`
/// `null` while the grant stands. Dates are written by ``RFC3339`` whatever the encoder's date strategy.
public struct Grant: Sendable, Hashable, Codable {
    /// `grant_id`: the grant's id (a lowercase UUID when the service creates it).
    public var id: String
    /// `user_id`: the user the grant is for.
    public var userID: String
    /// `entitlement`: the entitlement name it unlocks.
    public var entitlement: String
    /// `created_at`: when the admin made it (whole seconds when the service stores it); before then it grants nothing.
    public var createdAt: Date
    /// When the grant ends; nil for a lifetime grant.
    public var expiresAt: Date?
    /// When an admin revoked the grant; nil while it stands.
    public var revokedAt: Date?
    /// Why it was given (free text from the admin).
    public var reason: String

    /// A grant with these values, lifetime and standing unless `expiresAt` or `revokedAt` is given; nothing is
    /// validated.
    public init(id: String, userID: String, entitlement: String, createdAt: Date, expiresAt: Date? = nil,
                revokedAt: Date? = nil, reason: String) {
        self.id = id
        self.userID = userID
        self.entitlement = entitlement
        self.createdAt = createdAt
        self.expiresAt = expiresAt
        self.revokedAt = revokedAt
        self.reason = reason
    }

    private enum CodingKeys: String, CodingKey {
        case id = "grant_id"
        case userID = "user_id"
        case entitlement
        case createdAt = "created_at"
        case expiresAt = "expires_at"
        case revokedAt = "revoked_at"
        case reason
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        func date(_ key: CodingKeys) throws -> Date? {
            guard let text = try container.decodeIfPresent(String.self, forKey: key) else { return nil }
            guard let date = RFC3339.date(from: text) else {
                throw DecodingError.dataCorruptedError(
                    forKey: key, in: container,
                    debugDescription: "must be an RFC 3339 date-time such as 2026-11-22T01:20:00Z")
            }
            return date
        }
        id = try container.decode(String.self, forKey: .id)
        userID = try container.decode(String.self, forKey: .userID)
        entitlement = try container.decode(String.self, forKey: .entitlement)
        guard let createdAt = try date(.createdAt) else {
            throw DecodingError.keyNotFound(CodingKeys.createdAt, .init(
                codingPath: container.codingPath, debugDescription: "created_at is required"))
        }
        self.createdAt = createdAt
        expiresAt = try date(.expiresAt)
        revokedAt = try date(.revokedAt)
        reason = try container.decode(String.self, forKey: .reason)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(id, forKey: .id)
        try container.encode(userID, forKey: .userID)
        try container.encode(entitlement, forKey: .entitlement)
        try container.encode(RFC3339.string(from: createdAt), forKey: .createdAt)
        try container.encode(expiresAt.map(RFC3339.string(from:)), forKey: .expiresAt)
        try container.encode(revokedAt.map(RFC3339.string(from:)), forKey: .revokedAt)
        try container.encode(reason, forKey: .reason)
    }
}
