import ServiceRuntime
import EntitlementModel
import Foundation

/// What `GET /v1/admin/reports/purchases` reads: ``ReportStore``, or a stand-in where a route test runs without
/// PostgreSQL.
@Loop
protocol ReportReading: Sendable {
    /// The purchase report over `[from, to)`, only `environment` when given.
    func purchases(from: Date, to: Date, environment: StoreEnvironment?, on db: some PostgresQueryable) async throws -> PurchaseReportBody
}

/// The reports over recorded App Store transactions and the catalog.
@Loop
struct ReportStore: ReportReading {
    func purchases(from: Date, to: Date, environment: StoreEnvironment?, on db: some PostgresQueryable) async throws -> PurchaseReportBody {
        var parameters: [any PostgresEncodable] = [from, to]
        if let environment { parameters.append(environment.rawValue) }
        let rows = try await db.query("""
            SELECT t.product_id, t.environment, p.type AS product_type,
                   count(*) AS purchases,
                   count(*) FILTER (WHERE t.cancellation_date IS NOT NULL) AS refunded,
                   sum(t.quantity) AS units,
                   p.price, p.price_currency,
                   p.price::numeric * coalesce(sum(t.quantity) FILTER (WHERE t.cancellation_date IS NULL), 0) AS revenue
              FROM app_store_transactions t LEFT JOIN products p USING (product_id)
             WHERE t.purchase_date >= $1 AND t.purchase_date < $2\(environment == nil ? "" : " AND t.environment = $3")
             GROUP BY t.product_id, t.environment, p.type, p.price, p.price_currency
             ORDER BY t.environment, t.product_id
            """, parameters).rows
        return PurchaseReportBody(from: from, to: to, environment: environment, rows: try rows.map { row in
            PurchaseReportBody.Row(
                productID: try row.string("product_id"), environment: try row.string("environment"),
                productType: try row.optionalString("product_type"), count: try row.int("purchases"),
                refunded: try row.int("refunded"), units: try row.int("units"), price: try row.optionalString("price"),
                priceCurrency: try row.optionalString("price_currency"), revenue: try row.optionalString("revenue"))
        })
    }
}
