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

/// The reports over recorded App Store transactions and the catalog's prices as they were when each purchase was
/// made. Only what a customer paid for counts: a family member's copy of a purchase (`ownership = 'family_shared'`,
/// its own transaction id) is not a sale, nor a paying subscriber.
@Loop
struct ReportStore: ReportReading {
    /// Each catalog price with the span it was in force (`product_prices`, migration 0017): a purchase counts at
    /// the price of its purchase date, so a later change of price (or currency) leaves past revenue as it was.
    private static let prices = """
        prices AS (
            SELECT product_id, price, price_currency, valid_from,
                   lead(valid_from, 1, 'infinity') OVER (PARTITION BY product_id ORDER BY valid_from) AS valid_until
              FROM product_prices)
        """
    /// The price of transaction `t`'s purchase date, as `pr`.
    private static let priceThen = """
        LEFT JOIN prices pr ON pr.product_id = t.product_id AND t.purchase_date >= pr.valid_from AND t.purchase_date < pr.valid_until
        """
    /// Whether transaction `t` was refunded (or revoked): a period that ended by an upgrade carries the upgrade's
    /// date as its `cancellation_date` too, but was paid for.
    private static let refunded = "t.cancellation_date IS NOT NULL AND NOT t.is_upgraded"
    /// The units of transaction `t` paid for and kept: its quantity, less the share refunded (all of it without a
    /// `revocation_percentage`: migration 0018), none for a free trial.
    private static let keptUnits = """
        CASE WHEN t.is_trial_period THEN 0
             WHEN \(refunded) THEN t.quantity * (100000 - coalesce(t.revocation_percentage, 100000)) / 100000.0
             ELSE t.quantity END
        """
    /// The revenue of rows grouped with price `pr`: the price × the units kept, to the price's own decimals.
    private static let revenue = "round(pr.price::numeric * coalesce(sum(\(keptUnits)), 0), scale(pr.price::numeric)) AS revenue"

    func purchases(from: Date, to: Date, environment: StoreEnvironment?, on db: some PostgresQueryable) async throws -> PurchaseReportBody {
        var parameters: [any PostgresEncodable] = [from, to]
        if let environment { parameters.append(environment.rawValue) }
        let rows = try await db.query("""
            WITH \(Self.prices)
            SELECT t.product_id, t.environment, p.type AS product_type,
                   count(*) AS purchases,
                   count(*) FILTER (WHERE \(Self.refunded)) AS refunded,
                   count(*) FILTER (WHERE t.is_trial_period) AS trials,
                   sum(t.quantity) AS units,
                   pr.price, pr.price_currency,
                   \(Self.revenue)
              FROM app_store_transactions t LEFT JOIN products p USING (product_id)
              \(Self.priceThen)
             WHERE t.purchase_date >= $1 AND t.purchase_date < $2 AND t.ownership = 'purchased'\(environment == nil ? "" : " AND t.environment = $3")
             GROUP BY t.product_id, t.environment, p.type, pr.price, pr.price_currency
             ORDER BY t.environment, t.product_id, pr.price_currency NULLS LAST, pr.price
            """, parameters).rows
        return PurchaseReportBody(from: from, to: to, environment: environment, rows: try rows.map { row in
            PurchaseReportBody.Row(
                productID: try row.string("product_id"), environment: try row.string("environment"),
                productType: try row.optionalString("product_type"), count: try row.int("purchases"),
                refunded: try row.int("refunded"), trials: try row.int("trials"), units: try row.int("units"), price: try row.optionalString("price"),
                priceCurrency: try row.optionalString("price_currency"), revenue: try row.optionalString("revenue"))
        })
    }

    /// Three reads: the buckets (`generate_series`), the purchases by purchase date (on
    /// `app_store_transactions_purchased`) and the subscriptions live at each bucket's end (the transactions
    /// expiring after the window's start less 60 days, on `app_store_transactions_expiring`: each read once, in
    /// one sort by subscription, whatever the number of buckets).
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
            WITH \(Self.prices)
            SELECT date_trunc($3::text, t.purchase_date AT TIME ZONE 'UTC') AT TIME ZONE 'UTC' AS period_start,
                   t.product_id, t.environment,
                   count(*) AS purchases,
                   count(*) FILTER (WHERE \(Self.refunded)) AS refunded,
                   count(*) FILTER (WHERE t.is_trial_period) AS trials,
                   sum(t.quantity) AS units,
                   \(Self.revenue),
                   pr.price_currency
              FROM app_store_transactions t
              \(Self.priceThen)
             WHERE t.purchase_date >= $1::timestamptz AND t.purchase_date < $2::timestamptz AND t.ownership = 'purchased'\(onlyEnvironment)
             GROUP BY 1, t.product_id, t.environment, pr.price, pr.price_currency
             ORDER BY 1, t.environment, t.product_id, pr.price_currency NULLS LAST, pr.price
            """, parameters).rows.map { row in
            TimeseriesReportBody.Point(
                periodStart: try row.date("period_start"), productID: try row.string("product_id"),
                environment: try row.string("environment"), purchases: try row.int("purchases"), refunded: try row.int("refunded"),
                trials: try row.int("trials"),
                units: try row.int("units"), revenue: try row.optionalString("revenue"), priceCurrency: try row.optionalString("price_currency"))
        }
        // Each transaction of a subscription is live from its purchase until it expires (or, the subscription's
        // latest, until the end of a billing grace period Apple granted past it), is refunded, or the next
        // transaction of its subscription is bought; a subscription therefore counts once at any instant. Live
        // counts at each bucket's end are running sums of +1 at each start and −1 at each end, each put in the
        // first bucket whose end reaches it: one pass over the transactions, not one per bucket. A free trial counts
        // apart (`trials`), with no revenue. The monthly price is the catalog price ÷ the whole months of the
        // transaction's period (a month of 28–31 days is one month, a year twelve), or, for a period under 27
        // days, × (an average month ÷ the period), never below a day.
        let subscriptions = try await db.query("""
            WITH buckets AS (\(buckets)), \(Self.prices),
            chain AS (
                SELECT t.environment, pr.price_currency, t.purchase_date, t.expires_date, t.cancellation_date,
                       t.is_trial_period AS trial,
                       CASE WHEN t.is_trial_period THEN pr.price::numeric * 0
                            WHEN t.expires_date - t.purchase_date >= interval '27 days'
                            THEN pr.price::numeric / round(extract(epoch FROM t.expires_date - t.purchase_date) / 2629746)
                            ELSE pr.price::numeric * 2629746 / greatest(extract(epoch FROM t.expires_date - t.purchase_date), 86400)
                       END AS monthly,
                       lead(t.purchase_date) OVER (PARTITION BY t.original_transaction_id ORDER BY t.purchase_date, t.transaction_id) AS next_purchase,
                       s.in_billing_retry, s.grace_period_expires_date
                  FROM app_store_transactions t
                  JOIN products p ON p.product_id = t.product_id AND p.type = 'auto_renewable'
                  \(Self.priceThen)
                  LEFT JOIN subscriptions s ON s.original_transaction_id = t.original_transaction_id
                 WHERE t.expires_date > $1::timestamptz - interval '60 days' AND t.purchase_date <= $2::timestamptz
                   AND t.ownership = 'purchased'\(onlyEnvironment)
            ),
            segments AS (
                SELECT environment, price_currency, trial, monthly, purchase_date AS starts,
                       least(coalesce(next_purchase, 'infinity'), coalesce(cancellation_date, 'infinity'),
                             CASE WHEN next_purchase IS NULL AND in_billing_retry AND grace_period_expires_date > expires_date
                                  THEN grace_period_expires_date ELSE expires_date END) AS ends
                  FROM chain
            ),
            deltas AS (
                SELECT starts AS at, environment, price_currency, trial, 1 AS n, monthly AS m FROM segments WHERE ends > starts
                UNION ALL
                SELECT ends, environment, price_currency, trial, -1, -monthly FROM segments WHERE ends > starts AND ends <= $2::timestamptz
            ),
            sums AS (
                SELECT greatest(date_trunc($3::text, (at - interval '1 microsecond') AT TIME ZONE 'UTC') AT TIME ZONE 'UTC',
                                (SELECT min(period_start) FROM buckets)) AS period_start,
                       environment, price_currency,
                       sum(n) FILTER (WHERE NOT trial) AS active, sum(n) FILTER (WHERE trial) AS trials, sum(m) AS mrr
                  FROM deltas
                 GROUP BY 1, 2, 3
            ),
            running AS (
                SELECT b.period_start, g.environment, g.price_currency,
                       sum(coalesce(s.active, 0)) OVER w AS active, sum(coalesce(s.trials, 0)) OVER w AS trials, sum(s.mrr) OVER w AS mrr
                  FROM buckets b
                 CROSS JOIN (SELECT DISTINCT environment, price_currency FROM sums) g
                  LEFT JOIN sums s ON s.period_start = b.period_start AND s.environment = g.environment
                                  AND s.price_currency IS NOT DISTINCT FROM g.price_currency
                WINDOW w AS (PARTITION BY g.environment, g.price_currency ORDER BY b.period_start)
            )
            SELECT period_start, environment, price_currency, active, trials, round(mrr, 2) AS mrr
              FROM running
             WHERE active > 0 OR trials > 0
             ORDER BY period_start, environment, price_currency NULLS LAST
            """, parameters).rows.map { row in
            TimeseriesReportBody.Subscriptions(
                periodStart: try row.date("period_start"), environment: try row.string("environment"),
                priceCurrency: try row.optionalString("price_currency"), activeSubscriptions: try row.int("active"),
                trials: try row.int("trials"), mrr: try row.optionalString("mrr"))
        }
        return TimeseriesReportBody(from: from, to: to, interval: interval, environment: environment, periods: periods,
                                    points: points, subscriptions: subscriptions)
    }
}
