import ServiceRuntime
import EntitlementModel
import Foundation

/// The bucket width of `GET /v1/admin/reports/timeseries`: PostgreSQL's `date_trunc` unit, in UTC.
enum ReportInterval: String, Sendable {
    case day, week, month

    /// How many buckets `[from, to)` makes, as the report's `generate_series` makes them: from the start of the
    /// bucket holding `from` (a UTC day, an ISO week from Monday, a month), one a step, while one starts before
    /// `to`; counting stops once past `limit`.
    func bucketCount(from: Date, to: Date, limit: Int) -> Int {
        var calendar = Calendar(identifier: .iso8601)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        let unit: Calendar.Component = switch self {
        case .day: .day
        case .week: .weekOfYear
        case .month: .month
        }
        guard var start = calendar.dateInterval(of: unit, for: from)?.start else { return limit + 1 }
        var count = 0
        while start < to && count <= limit {
            count += 1
            guard let next = calendar.date(byAdding: unit, value: 1, to: start) else { break }
            start = next
        }
        return count
    }

    /// The most buckets one report answers: a year of days, and a month's more.
    static let maximumBuckets = 398
}

/// The body of `GET /v1/admin/reports/timeseries`: purchases, refunds and revenue per bucket, product and
/// environment (bucketed by purchase date, as the purchase report counts them), and the auto-renewable
/// subscriptions active at each bucket's end with a monthly-revenue (MRR) estimate. Sandbox is never added to
/// Production.
struct TimeseriesReportBody: Encodable {
    var from: Date
    var to: Date
    var interval: ReportInterval
    var environment: StoreEnvironment?
    /// Every bucket's start in the window, oldest first, whether or not anything happened in it.
    var periods: [Date]
    var points: [Point]
    var subscriptions: [Subscriptions]

    /// One product in one environment in one bucket.
    struct Point: Encodable {
        var periodStart: Date
        var productID: String
        var environment: String
        var purchases: Int
        /// Of those purchases, the ones Apple has since refunded or revoked.
        var refunded: Int
        /// Of those purchases, free trials: no revenue.
        var trials: Int
        var units: Int
        /// The catalog price × the units neither refunded nor a free trial, a decimal string; nil without a catalog price.
        var revenue: String?
        var priceCurrency: String?

        enum CodingKeys: String, CodingKey {
            case periodStart = "period_start", productID = "product_id", environment, purchases, refunded, trials, units, revenue
            case priceCurrency = "price_currency"
        }

        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(RFC3339.string(from: periodStart), forKey: .periodStart)
            try container.encode(productID, forKey: .productID)
            try container.encode(environment, forKey: .environment)
            try container.encode(purchases, forKey: .purchases)
            try container.encode(refunded, forKey: .refunded)
            try container.encode(trials, forKey: .trials)
            try container.encode(units, forKey: .units)
            try container.encode(revenue, forKey: .revenue)
            try container.encode(priceCurrency, forKey: .priceCurrency)
        }
    }

    /// The subscriptions of one environment active at the end of one bucket (or at `to` for the last) whose
    /// products are priced in one currency (nil: products without a catalog price): prices in different
    /// currencies are never added together.
    struct Subscriptions: Encodable {
        var periodStart: Date
        var environment: String
        var priceCurrency: String?
        /// Paying subscriptions: live at that instant (in a billing grace period included), not in a free trial.
        var activeSubscriptions: Int
        /// Subscriptions in a free trial at that instant.
        var trials: Int
        /// Each paying subscription's catalog price scaled to a month by its current period's length, summed;
        /// a decimal string in `priceCurrency`, nil when these subscriptions' products have no catalog price.
        var mrr: String?

        enum CodingKeys: String, CodingKey {
            case periodStart = "period_start", environment, priceCurrency = "price_currency", activeSubscriptions = "active_subscriptions", trials, mrr
        }

        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(RFC3339.string(from: periodStart), forKey: .periodStart)
            try container.encode(environment, forKey: .environment)
            try container.encode(priceCurrency, forKey: .priceCurrency)
            try container.encode(activeSubscriptions, forKey: .activeSubscriptions)
            try container.encode(trials, forKey: .trials)
            try container.encode(mrr, forKey: .mrr)
        }
    }

    enum CodingKeys: String, CodingKey { case from, to, interval, environment, periods, points, subscriptions }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(RFC3339.string(from: from), forKey: .from)
        try container.encode(RFC3339.string(from: to), forKey: .to)
        try container.encode(interval.rawValue, forKey: .interval)
        try container.encode(environment?.rawValue, forKey: .environment)
        try container.encode(periods.map { RFC3339.string(from: $0) }, forKey: .periods)
        try container.encode(points, forKey: .points)
        try container.encode(subscriptions, forKey: .subscriptions)
    }
}
