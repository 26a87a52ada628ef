import ServiceRuntime
import EntitlementModel
import Foundation

/// What `GET /v1/admin/reports/purchases` reads: ``ReportStore``, or a stand-in where a route test runs without
/// PostgreSQL.
@Loop
protocol ReportReading: Sendable {
    /// The purchase report over `[from, to)`, only `environment` when given.
    func purchases(from: Date, to: Date, environment: StoreEnvironment?, on db: some PostgresQueryable) async throws -> PurchaseReportBody
    /// The time series over `[from, to)` in `interval` buckets (UTC), only `environment` when given.
    func timeseries(from: Date, to: Date, interval: ReportInterval, environment: StoreEnvironment?,
                    on db: some PostgresQueryable) async throws -> TimeseriesReportBody
}

/// The reports over recorded App Store transactions and the catalog. Only what a customer paid for counts: a
/// family member's copy of a purchase (`ownership = 'family_shared'`, its own transaction id) is not a sale,
/// nor a paying subscriber.
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
             WHERE t.purchase_date >= $1 AND t.purchase_date < $2 AND t.ownership = 'purchased'\(environment == nil ? "" : " AND t.environment = $3")
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

    /// Three reads, each on an index: the buckets (`generate_series`), the purchases by purchase date
    /// (`app_store_transactions_purchased`) and the subscriptions live at each bucket's end
    /// (`app_store_transactions_expiring`: only transactions expiring after the window's start are read).
    func timeseries(from: Date, to: Date, interval: ReportInterval, environment: StoreEnvironment?,
                    on db: some PostgresQueryable) async throws -> TimeseriesReportBody {
        var parameters: [any PostgresEncodable] = [from, to, interval.rawValue]
        if let environment { parameters.append(environment.rawValue) }
        let onlyEnvironment = environment == nil ? "" : " AND t.environment = $4"
        let buckets = """
            SELECT p AS period_start, least(p + ('1 ' || $3::text)::interval, $2::timestamptz) AS period_end
              FROM generate_series(date_trunc($3::text, $1::timestamptz AT TIME ZONE 'UTC') AT TIME ZONE 'UTC',
                                   $2::timestamptz - interval '1 microsecond', ('1 ' || $3::text)::interval) AS p
            """
        let periods = try await db.query("SELECT period_start FROM (\(buckets)) b ORDER BY 1", [from, to, interval.rawValue]).rows.map { try $0.date("period_start") }
        let points = try await db.query("""
            SELECT date_trunc($3::text, t.purchase_date AT TIME ZONE 'UTC') AT TIME ZONE 'UTC' AS period_start,
                   t.product_id, t.environment,
                   count(*) AS purchases,
                   count(*) FILTER (WHERE t.cancellation_date IS NOT NULL) AS refunded,
                   sum(t.quantity) AS units,
                   p.price::numeric * coalesce(sum(t.quantity) FILTER (WHERE t.cancellation_date IS NULL), 0) AS revenue,
                   p.price_currency
              FROM app_store_transactions t LEFT JOIN products p USING (product_id)
             WHERE t.purchase_date >= $1::timestamptz AND t.purchase_date < $2::timestamptz AND t.ownership = 'purchased'\(onlyEnvironment)
             GROUP BY 1, t.product_id, t.environment, p.price, p.price_currency
             ORDER BY 1, t.environment, t.product_id
            """, parameters).rows.map { row in
            TimeseriesReportBody.Point(
                periodStart: try row.date("period_start"), productID: try row.string("product_id"),
                environment: try row.string("environment"), purchases: try row.int("purchases"), refunded: try row.int("refunded"),
                units: try row.int("units"), revenue: try row.optionalString("revenue"), priceCurrency: try row.optionalString("price_currency"))
        }
        // A subscription counts once (its latest transaction live at the bucket's end); its monthly price is the
        // catalog price ÷ the whole months of that transaction's period (a month of 28–31 days is one month, a
        // year twelve), or, for a period under 27 days, × (an average month ÷ the period), never below a day.
        let subscriptions = try await db.query("""
            WITH buckets AS (\(buckets)),
            live AS (
                SELECT DISTINCT ON (b.period_start, t.original_transaction_id)
                       b.period_start, t.environment, p.price, p.price_currency, t.purchase_date, t.expires_date
                  FROM buckets b
                  JOIN app_store_transactions t
                    ON t.expires_date > b.period_end AND t.expires_date > $1::timestamptz AND t.purchase_date <= b.period_end
                   AND (t.cancellation_date IS NULL OR t.cancellation_date > b.period_end) AND t.ownership = 'purchased'\(onlyEnvironment)
                  JOIN products p ON p.product_id = t.product_id AND p.type = 'auto_renewable'
                 ORDER BY b.period_start, t.original_transaction_id, t.purchase_date DESC
            )
            SELECT period_start, environment, price_currency, count(*) AS active,
                   round(sum(CASE WHEN expires_date - purchase_date >= interval '27 days'
                                  THEN price::numeric / round(extract(epoch FROM expires_date - purchase_date) / 2629746)
                                  ELSE price::numeric * 2629746 / greatest(extract(epoch FROM expires_date - purchase_date), 86400)
                             END), 2) AS mrr
              FROM live
             GROUP BY period_start, environment, price_currency
             ORDER BY period_start, environment, price_currency NULLS LAST
            """, parameters).rows.map { row in
            TimeseriesReportBody.Subscriptions(
                periodStart: try row.date("period_start"), environment: try row.string("environment"),
                priceCurrency: try row.optionalString("price_currency"), activeSubscriptions: try row.int("active"),
                mrr: try row.optionalString("mrr"))
        }
        return TimeseriesReportBody(from: from, to: to, interval: interval, environment: environment, periods: periods,
                                    points: points, subscriptions: subscriptions)
    }
}
