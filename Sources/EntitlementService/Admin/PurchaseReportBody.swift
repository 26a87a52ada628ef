import ServiceRuntime
import EntitlementModel
import Foundation

/// The body of `GET /v1/admin/reports/purchases`: verified App Store purchases (each transaction once, renewals
/// included) whose purchase date falls in `[from, to)`, grouped by product and environment, with the catalog's
/// price. Sandbox purchases are never added to production ones.
struct PurchaseReportBody: Encodable {
    var from: Date
    var to: Date
    var environment: StoreEnvironment?
    var rows: [Row]

    /// One product in one environment.
    struct Row: Encodable {
        var productID: String
        var environment: String
        /// From the catalog; nil for a product it does not know.
        var productType: String?
        /// Transactions purchased in the window.
        var count: Int
        /// Of those, the ones Apple has since refunded or revoked.
        var refunded: Int
        /// Of those, free trials (`is_trial_period`): no revenue.
        var trials: Int
        /// Items bought (a consumable purchase may carry a quantity above one).
        var units: Int
        var price: String?
        var priceCurrency: String?
        /// `price` × the units neither refunded nor a free trial, as a decimal string; nil without a catalog price.
        var revenue: String?

        enum CodingKeys: String, CodingKey {
            case productID = "product_id", environment, productType = "product_type", count, refunded, trials, units, price
            case priceCurrency = "price_currency", revenue
        }

        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(productID, forKey: .productID)
            try container.encode(environment, forKey: .environment)
            try container.encode(productType, forKey: .productType)
            try container.encode(count, forKey: .count)
            try container.encode(refunded, forKey: .refunded)
            try container.encode(trials, forKey: .trials)
            try container.encode(units, forKey: .units)
            try container.encode(price, forKey: .price)
            try container.encode(priceCurrency, forKey: .priceCurrency)
            try container.encode(revenue, forKey: .revenue)
        }
    }

    enum CodingKeys: String, CodingKey { case from, to, environment, rows }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(RFC3339.string(from: from), forKey: .from)
        try container.encode(RFC3339.string(from: to), forKey: .to)
        try container.encode(environment?.rawValue, forKey: .environment)
        try container.encode(rows, forKey: .rows)
    }
}
