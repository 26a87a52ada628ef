import Foundation

extension Entitlement: Decodable {
    /// Reads one value of the `entitlements` object as ``encode(to:)`` writes it, so a state stored as JSON (the
    /// last one a webhook event carried) reads back as the same value. `active` is not read: an entitlement is
    /// active exactly when it has no `inactive_reason`. Times have whole seconds, as everything the API writes.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        let expires = try container.decodeIfPresent(String.self, forKey: .expiresAt)
        if let expires {
            guard let date = RFC3339.date(from: expires) else {
                throw DecodingError.dataCorruptedError(forKey: .expiresAt, in: container,
                                                       debugDescription: "must be an RFC 3339 date-time")
            }
            expiresAt = date
        } else {
            expiresAt = nil
        }
        inactiveReason = try container.decodeIfPresent(InactiveReason.self, forKey: .inactiveReason)
        switch try container.decode(String.self, forKey: .source) {
        case "app_store":
            source = .appStore(AppStorePurchase(
                productID: try container.decode(String.self, forKey: .productID),
                productType: try container.decode(ProductType.self, forKey: .productType),
                environment: try container.decode(StoreEnvironment.self, forKey: .environment),
                willRenew: try container.decode(Bool.self, forKey: .willRenew),
                inGracePeriod: try container.decode(Bool.self, forKey: .inGracePeriod),
                inBillingRetry: try container.decode(Bool.self, forKey: .inBillingRetry),
                ownership: try container.decode(Ownership.self, forKey: .ownership),
                originalTransactionID: try container.decode(String.self, forKey: .originalTransactionID)))
        case "grant":
            source = .grant(id: try container.decode(String.self, forKey: .grantID),
                            reason: try container.decode(String.self, forKey: .reason))
        case let other:
            throw DecodingError.dataCorruptedError(forKey: .source, in: container,
                                                   debugDescription: "unknown source '\(other)'")
        }
    }

    /// This entitlement as JSON shows it: its time floored to a whole second (``RFC3339`` writes no fraction).
    public var asWritten: Entitlement {
        var copy = self
        copy.expiresAt = expiresAt.map { Date(timeIntervalSinceReferenceDate: $0.timeIntervalSinceReferenceDate.rounded(.down)) }
        return copy
    }
}

extension EntitlementState: Codable {
    private enum CodingKeys: String, CodingKey {
        case entitlements, consumables
    }

    /// `{"entitlements": {name: entitlement}, "consumables": {currency: balance}}`, as in the entitlements body.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self.init(entitlements: try container.decode([String: Entitlement].self, forKey: .entitlements),
                  consumables: try container.decode([String: Int].self, forKey: .consumables))
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(entitlements, forKey: .entitlements)
        try container.encode(consumables, forKey: .consumables)
    }

    /// The state as `GET /v1/users/{user_id}/entitlements` shows it (times in whole seconds): two states differ
    /// for a client exactly when their written forms differ.
    public var asWritten: EntitlementState {
        EntitlementState(entitlements: entitlements.mapValues(\.asWritten), consumables: consumables)
    }
}
