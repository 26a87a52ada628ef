import Foundation

/// The product catalog: every product the service knows, in file order, looked up by id.
///
/// Codable as the catalog file, `{"products": [...]}`. Decoding validates every product (see ``Product``) and
/// rejects a repeated `product_id`; errors carry the path of the offending field (see ``CatalogError``).
public struct Catalog: Sendable, Hashable, Codable {
    /// The products in the order they were given.
    public let products: [Product]
    private let positions: [String: Int]

    /// A catalog of `products`; throws when two share a `product_id` (field `products[i].product_id`).
    public init(products: [Product]) throws(CatalogError) {
        if let problem = Self.duplicate(in: products) {
            throw CatalogError(field: FieldKey.render(problem.path), reason: problem.reason)
        }
        self.init(unchecked: products)
    }

    /// Decodes and validates a catalog file.
    public init(json: Data) throws(CatalogError) {
        self = try CatalogError.decoding(Catalog.self, from: json)
    }

    private init(unchecked products: [Product]) {
        self.products = products
        var positions: [String: Int] = [:]
        for (position, product) in products.enumerated() { positions[product.productID] = position }
        self.positions = positions
    }

    /// The product with this id, if the catalog has it.
    public func product(_ id: String) -> Product? {
        positions[id].map { products[$0] }
    }

    /// Where the product with this id stands in `products`, if the catalog has it.
    func position(of id: String) -> Int? {
        positions[id]
    }

    private enum CodingKeys: String, CodingKey {
        case products
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        let products = try container.decode([Product].self, forKey: .products)
        if let problem = Self.duplicate(in: products) {
            throw DecodingError.dataCorrupted(.init(codingPath: container.codingPath + problem.path,
                                                    debugDescription: problem.reason))
        }
        self.init(unchecked: products)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(products, forKey: .products)
    }

    private static func duplicate(in products: [Product]) -> FieldProblem? {
        var seen = Set<String>()
        for (position, product) in products.enumerated() where !seen.insert(product.productID).inserted {
            return FieldProblem(path: [CodingKeys.products, FieldKey(position), Product.CodingKeys.productID],
                                reason: "repeats product \"\(product.productID)\"")
        }
        return nil
    }
}

/// One catalog entry: an App Store product, what it unlocks and, for consumables, what it credits.
///
/// Codable as one element of the catalog file's `products` (snake_case keys; absent optional fields are left
/// out when encoding). Every way of making one validates it:
/// - `product_id`: 1–255 letters, digits, `.`, `_` or `-`;
/// - `entitlements`: names of 1–255 characters without control characters, none repeated; at least one for
///   every type but `consumable` (which may have none, and may leave the field out);
/// - `duration`: an ``ISODuration`` of years, months, weeks and days (no clock part), longer than zero; required
///   for `non_renewing`;
/// - `currency` (1–255 letters, digits, `.`, `_` or `-`) and `amount` (an integer from 1 to
///   ``maximumAmount``): required for `consumable`;
/// - `price`: a decimal string such as `"4.99"`; `price_currency`: three capital letters (ISO 4217); each
///   requires the other;
/// - `subscription_group`: 1–255 characters.
///
/// Fields that do not apply to the type (a `duration` on a consumable) are accepted, checked and kept, but the
/// entitlement rules ignore them.
public struct Product: Sendable, Hashable, Codable {
    /// The App Store product identifier (`product_id`) transactions name: 1–255 letters, digits, `.`, `_` or `-`.
    public let productID: String
    /// `type`: decides which other fields are required and which entitlement rules apply.
    public let type: ProductType
    /// The entitlement names this product unlocks.
    public let entitlements: [String]
    /// How long a `non_renewing` purchase lasts.
    public let duration: ISODuration?
    /// The ledger currency a `consumable` credits.
    public let currency: String?
    /// How much of `currency` one `consumable` purchase credits.
    public let amount: Int?
    /// The list price as a decimal string, for reports.
    public let price: String?
    /// The ISO 4217 currency of `price`.
    public let priceCurrency: String?
    /// The subscription group; when nil, the transaction's own `subscriptionGroupIdentifier` is used.
    public let subscriptionGroup: String?

    /// True when `other` unlocks for its owners exactly what this product does: the same type, entitlements,
    /// duration and subscription group, the only fields the entitlement rules read. Replacing one with the other
    /// changes no one's entitlements; prices, and a consumable's `currency` and `amount` (credited once, at
    /// purchase), may differ. A missing product (`nil`) never unlocks alike.
    public func unlocksAlike(_ other: Product?) -> Bool {
        guard let other else { return false }
        return productID == other.productID && type == other.type && Set(entitlements) == Set(other.entitlements)
            && duration == other.duration && subscriptionGroup == other.subscriptionGroup
    }

    /// A validated product; throws ``CatalogError`` naming the field (`duration`, `entitlements[1]`, ...).
    public init(
        productID: String, type: ProductType, entitlements: [String] = [], duration: ISODuration? = nil,
        currency: String? = nil, amount: Int? = nil, price: String? = nil, priceCurrency: String? = nil,
        subscriptionGroup: String? = nil
    ) throws(CatalogError) {
        self.productID = productID
        self.type = type
        self.entitlements = entitlements
        self.duration = duration
        self.currency = currency
        self.amount = amount
        self.price = price
        self.priceCurrency = priceCurrency
        self.subscriptionGroup = subscriptionGroup
        if let problem = firstProblem() {
            throw CatalogError(field: FieldKey.render(problem.path), reason: problem.reason)
        }
    }

    /// Decodes and validates one product (one element of the catalog file's `products`).
    public init(json: Data) throws(CatalogError) {
        self = try CatalogError.decoding(Product.self, from: json)
    }

    enum CodingKeys: String, CodingKey {
        case productID = "product_id"
        case type
        case entitlements
        case duration
        case currency
        case amount
        case price
        case priceCurrency = "price_currency"
        case subscriptionGroup = "subscription_group"
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        func decode<Value: Decodable>(_: Value.Type, _ key: CodingKeys, orSay reason: String) throws -> Value? {
            do {
                return try container.decodeIfPresent(Value.self, forKey: key)
            } catch {
                // Any failure here is a value of the wrong kind; Foundation reports some (such as 1.5 for an
                // integer) with its own error type, which would otherwise surface as "not valid JSON".
                throw DecodingError.dataCorruptedError(forKey: key, in: container, debugDescription: reason)
            }
        }
        productID = try container.decode(String.self, forKey: .productID)
        let typeName = try container.decode(String.self, forKey: .type)
        guard let type = ProductType(rawValue: typeName) else {
            throw DecodingError.dataCorruptedError(
                forKey: .type, in: container,
                debugDescription: "must be one of " + ProductType.allCases.map(\.rawValue).joined(separator: ", "))
        }
        self.type = type
        entitlements = try container.decodeIfPresent([String].self, forKey: .entitlements) ?? []
        if let text = try container.decodeIfPresent(String.self, forKey: .duration) {
            do {
                duration = try ISODuration(parsing: text)
            } catch {
                throw DecodingError.dataCorruptedError(
                    forKey: .duration, in: container,
                    debugDescription: "\(error.reason); expected an ISO 8601 duration such as P1M, P7D or P1Y")
            }
        } else {
            duration = nil
        }
        currency = try container.decodeIfPresent(String.self, forKey: .currency)
        amount = try decode(Int.self, .amount, orSay: Self.amountRule)
        price = try decode(String.self, .price, orSay: Self.priceRule)
        priceCurrency = try container.decodeIfPresent(String.self, forKey: .priceCurrency)
        subscriptionGroup = try container.decodeIfPresent(String.self, forKey: .subscriptionGroup)
        if let problem = firstProblem() {
            throw DecodingError.dataCorrupted(.init(codingPath: container.codingPath + problem.path,
                                                    debugDescription: problem.reason))
        }
        // Checked where entries come in (the catalog file, an admin's PUT), not where the catalog is read: an entry an
        // earlier release stored with more stays as it was (its purchases never credited), rather than failing the
        // catalog or being credited at the limit.
        if let amount, amount > Self.maximumAmount {
            throw DecodingError.dataCorrupted(.init(codingPath: container.codingPath + [CodingKeys.amount], debugDescription: Self.amountRule))
        }
    }

    /// The largest `amount` a consumable may credit per unit (10^12): a purchase's credit, `amount` × its
    /// quantity, is refused above it, so a larger amount could never be credited.
    public static let maximumAmount = 1_000_000_000_000

    private static let amountRule = "must be an integer from 1 to 1000000000000"
    private static let priceRule = "must be a decimal string such as \"4.99\""

    /// The first rule this product breaks, in field order.
    private func firstProblem() -> FieldProblem? {
        func problem(_ key: CodingKeys, _ reason: String) -> FieldProblem {
            FieldProblem(path: [key], reason: reason)
        }
        if !Self.isIdentifier(productID) {
            return problem(.productID, "must be 1–255 letters, digits, \".\", \"_\" or \"-\"")
        }
        if type != .consumable && entitlements.isEmpty {
            return problem(.entitlements, "must name at least one entitlement for \(type.rawValue) products")
        }
        var seen = Set<String>()
        for (position, name) in entitlements.enumerated() {
            let path: [any CodingKey] = [CodingKeys.entitlements, FieldKey(position)]
            guard Self.isName(name) else {
                return FieldProblem(path: path, reason: "must be 1–255 characters without control characters")
            }
            guard seen.insert(name).inserted else {
                return FieldProblem(path: path, reason: "repeats entitlement \"\(name)\"")
            }
        }
        if let duration, duration.isZero {
            return problem(.duration, "must be longer than zero")
        }
        if let duration, duration.hours + duration.minutes + duration.seconds > 0 {
            return problem(.duration, "must count years, months, weeks or days (PnY, PnM, PnW, PnD), not hours, minutes or seconds")
        }
        if type == .nonRenewing && duration == nil {
            return problem(.duration, "is required for non_renewing products (e.g. \"P1M\")")
        }
        if let currency, !Self.isIdentifier(currency) {
            return problem(.currency, "must be 1–255 letters, digits, \".\", \"_\" or \"-\"")
        }
        if type == .consumable && currency == nil {
            return problem(.currency, "is required for consumable products")
        }
        if let amount, amount <= 0 {
            return problem(.amount, Self.amountRule)
        }
        if type == .consumable && amount == nil {
            return problem(.amount, "is required for consumable products")
        }
        if let price, !Self.isDecimal(price) {
            return problem(.price, Self.priceRule)
        }
        if let priceCurrency, !(priceCurrency.utf8.count == 3 && priceCurrency.utf8.allSatisfy(Self.isCapital)) {
            return problem(.priceCurrency, "must be an ISO 4217 code such as \"USD\"")
        }
        // A price is an amount of a currency: reports sum prices per currency, and one without would be summed with none.
        switch (price, priceCurrency) {
        case (.some, nil): return problem(.priceCurrency, "is required with price")
        case (nil, .some): return problem(.price, "is required with price_currency")
        default: break
        }
        if let subscriptionGroup, !Self.isName(subscriptionGroup) {
            return problem(.subscriptionGroup, "must be 1–255 characters without control characters")
        }
        return nil
    }

    private static func isIdentifier(_ text: String) -> Bool {
        (1...255).contains(text.utf8.count) && text.utf8.allSatisfy { byte in
            isCapital(byte) || (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || isDigit(byte)
                || byte == UInt8(ascii: ".") || byte == UInt8(ascii: "_") || byte == UInt8(ascii: "-")
        }
    }

    private static func isName(_ text: String) -> Bool {
        (1...255).contains(text.unicodeScalars.count) && !text.unicodeScalars.contains { $0.properties.generalCategory == .control }
    }

    /// Digits, optionally followed by `.` and more digits; at most 32 characters.
    private static func isDecimal(_ text: String) -> Bool {
        let parts = text.utf8.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        return text.utf8.count <= 32 && (1...2).contains(parts.count)
            && parts.allSatisfy { !$0.isEmpty && $0.allSatisfy(isDigit) }
    }

    private static func isDigit(_ byte: UInt8) -> Bool { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) }
    private static func isCapital(_ byte: UInt8) -> Bool { (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte) }
}

/// Why a catalog or product was rejected: which field, and what is wrong with it.
public struct CatalogError: Error, Hashable, CustomStringConvertible {
    /// The offending field as a path, e.g. `products[2].duration` (catalog) or `duration` (one product);
    /// empty when the document as a whole is at fault (not JSON, or not an object).
    public let field: String
    /// What is wrong, e.g. `is required for non_renewing products (e.g. "P1M")`.
    public let reason: String

    public var description: String { field.isEmpty ? reason : "\(field): \(reason)" }

    /// An error with this field path (empty for the whole document) and reason; nothing is checked.
    public init(field: String, reason: String) {
        self.field = field
        self.reason = reason
    }

    /// Decodes `json` as `Value`, turning any decoding error into the field it concerns.
    static func decoding<Value: Decodable>(_: Value.Type, from json: Data) throws(CatalogError) -> Value {
        do {
            return try JSONDecoder().decode(Value.self, from: json)
        } catch let error as DecodingError {
            throw CatalogError(error)
        } catch {
            throw CatalogError(field: "", reason: "could not be decoded: \(error)")
        }
    }

    private init(_ error: DecodingError) {
        switch error {
        case .keyNotFound(let key, let context):
            self.init(field: FieldKey.render(context.codingPath + [key]), reason: "is required")
        case .valueNotFound(_, let context):
            self.init(field: FieldKey.render(context.codingPath), reason: "must not be null")
        case .typeMismatch(let type, let context):
            self.init(field: FieldKey.render(context.codingPath), reason: "must be " + Self.describe(type))
        case .dataCorrupted(let context) where context.codingPath.isEmpty:
            self.init(field: "", reason: "the document is not valid JSON")
        case .dataCorrupted(let context):
            self.init(field: FieldKey.render(context.codingPath), reason: context.debugDescription)
        @unknown default:
            self.init(field: "", reason: "could not be decoded: \(error)")
        }
    }

    private static func describe(_ type: Any.Type) -> String {
        switch type {
        case is String.Type: "a string"
        case is Int.Type: "an integer"
        case is Bool.Type: "true or false"
        case is [Any].Type: "an array"
        default: "an object"
        }
    }
}

/// A rule broken at a path inside the decoded document.
struct FieldProblem: Error {
    var path: [any CodingKey]
    var reason: String
}

/// An array position in a field path; also renders paths as `products[2].duration`.
struct FieldKey: CodingKey {
    let stringValue: String
    let intValue: Int?

    init(_ index: Int) {
        stringValue = "Index \(index)"
        intValue = index
    }

    init?(stringValue: String) {
        self.stringValue = stringValue
        intValue = nil
    }

    init?(intValue: Int) {
        self.init(intValue)
    }

    static func render(_ path: [any CodingKey]) -> String {
        var text = ""
        for key in path {
            if let index = key.intValue {
                text += "[\(index)]"
            } else {
                text += text.isEmpty ? key.stringValue : "." + key.stringValue
            }
        }
        return text
    }
}
