import Foundation

/// The outcome of ``EntitlementEvaluator/evaluate(transactions:renewals:grants:catalog:at:)``.
public struct EntitlementReport: Sendable, Hashable {
    /// The instant evaluated.
    public var asOf: Date
    /// Every entitlement the user has or had by `asOf`, active or not, by entitlement name.
    public var entitlements: [String: Entitlement]
    /// Product ids (sorted, distinct) of transactions made by `asOf` that the catalog does not know; they grant
    /// nothing, and are worth a log line.
    public var unknownProducts: [String]
    /// The earliest date after `asOf` that the evaluated data itself carries (see ``nextChange``).
    public var nextInputChange: Date?

    /// A report of these entitlements at `asOf`; `nextInputChange` starts nil (the evaluator sets it).
    public init(asOf: Date, entitlements: [String: Entitlement], unknownProducts: [String] = []) {
        self.asOf = asOf
        self.entitlements = entitlements
        self.unknownProducts = unknownProducts
    }
}

/// The body of `GET /v1/users/{user_id}/entitlements`:
/// `{"user_id", "as_of", "entitlements": {name: ``Entitlement``}, "consumables": {currency: balance}}`,
/// `as_of` in RFC 3339 whatever the encoder's date strategy; `unknown_products` lists (always, empty when there
/// are none) the user's purchased products the catalog does not know (stored, never granted).
public struct EntitlementsDocument: Sendable, Hashable, Encodable {
    /// `user_id`: whose entitlements these are.
    public var userID: String
    /// `as_of`: the instant evaluated, written in RFC 3339.
    public var asOf: Date
    /// `entitlements`: every entitlement the user has or had by `as_of`, active or not, by name.
    public var entitlements: [String: Entitlement]
    /// Ledger balances by consumable currency.
    public var consumables: [String: Int]
    /// Purchased products missing from the catalog.
    public var unknownProducts: [String]

    /// The document for `userID` from an evaluation and the user's ledger balances.
    public init(userID: String, report: EntitlementReport, consumables: [String: Int]) {
        self.userID = userID
        self.asOf = report.asOf
        self.entitlements = report.entitlements
        self.consumables = consumables
        self.unknownProducts = report.unknownProducts
    }

    private enum CodingKeys: String, CodingKey {
        case userID = "user_id"
        case asOf = "as_of"
        case entitlements
        case consumables
        case unknownProducts = "unknown_products"
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(userID, forKey: .userID)
        try container.encode(RFC3339.string(from: asOf), forKey: .asOf)
        try container.encode(entitlements, forKey: .entitlements)
        try container.encode(consumables, forKey: .consumables)
        try container.encode(unknownProducts, forKey: .unknownProducts)
    }
}
