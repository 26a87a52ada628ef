import ServiceRuntime
import EntitlementModel
import Foundation

/// `GET /v1/admin/reports/purchases`: verified App Store purchases (each transaction once, renewals
/// included) whose purchase date falls in `[from, to)`, grouped by product and environment, with the
/// catalog's price. Sandbox purchases are never added to production ones.
@Loop
struct PurchaseReport {
    let db: PostgresPool

    /// The report over `[from, to)`, only `environment` when given.
    func run(from: Date, to: Date, environment: StoreEnvironment?) async throws -> PurchaseReportBody {
        let rows = try await db.query("""
            SELECT t.product_id, t.environment, p.type AS product_type,
                   count(*) AS purchases,
                   count(*) FILTER (WHERE t.cancellation_date IS NOT NULL) AS refunded,
                   sum(t.quantity) AS units,
                   p.price, p.price_currency,
                   (p.price::numeric * coalesce(sum(t.quantity) FILTER (WHERE t.cancellation_date IS NULL), 0))::text AS revenue
              FROM app_store_transactions t LEFT JOIN products p USING (product_id)
             WHERE t.purchase_date >= $1 AND t.purchase_date < $2 AND ($3::text IS NULL OR t.environment = $3)
             GROUP BY t.product_id, t.environment, p.type, p.price, p.price_currency
             ORDER BY t.environment, t.product_id
            """, [from, to, environment?.rawValue]).rows
        return PurchaseReportBody(from: from, to: to, environment: environment, rows: try rows.map { row in
            PurchaseReportBody.Row(
                productID: try row.string("product_id"), environment: try row.string("environment"),
                productType: try row.optionalString("product_type"), count: try row.int("purchases"),
                refunded: try row.int("refunded"), units: try row.int("units"), price: try row.optionalString("price"),
                priceCurrency: try row.optionalString("price_currency"), revenue: try row.optionalString("revenue"))
        })
    }
}

/// The body of the purchase report.
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
        /// Items bought (a consumable purchase may carry a quantity above one).
        var units: Int
        var price: String?
        var priceCurrency: String?
        /// `price` × the units not refunded, as a decimal string; nil without a catalog price.
        var revenue: String?

        enum CodingKeys: String, CodingKey {
            case productID = "product_id", environment, productType = "product_type", count, refunded, units, price
            case priceCurrency = "price_currency", revenue
        }

        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(productID, forKey: .productID)
            try container.encode(environment, forKey: .environment)
            try container.encode(productType, forKey: .productType)
            try container.encode(count, forKey: .count)
            try container.encode(refunded, forKey: .refunded)
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
