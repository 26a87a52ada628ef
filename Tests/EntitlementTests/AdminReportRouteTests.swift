import EntitlementModel
import Foundation
import Testing
@testable import EntitlementService
@testable import ServiceRuntime

/// The purchase report's route without PostgreSQL: `AdminRoutes` reads the report through `ReportReading`, here a
/// stand-in that answers no rows and keeps the window it was asked for. The pool names a socket directory that
/// does not exist, so a request that reached the database would fail.
@Suite struct AdminReportRouteTests {
    /// Answers every window with no rows and remembers what it was asked.
    @Loop final class RecordedReports: ReportReading {
        private(set) var asked: [(from: Date, to: Date, environment: StoreEnvironment?)] = []

        func purchases(from: Date, to: Date, environment: StoreEnvironment?, on db: some PostgresQueryable) async throws -> PurchaseReportBody {
            asked.append((from, to, environment))
            return PurchaseReportBody(from: from, to: to, environment: environment, rows: [])
        }

        func timeseries(from: Date, to: Date, interval: ReportInterval, environment: StoreEnvironment?,
                        on db: some PostgresQueryable) async throws -> TimeseriesReportBody {
            asked.append((from, to, environment))
            return TimeseriesReportBody(from: from, to: to, interval: interval, environment: environment, periods: [], points: [], subscriptions: [])
        }
    }

    static let adminKey = "adm-" + UUID().uuidString

    /// The admin routes on a pool that never connects, with `reports` as the report's reads.
    @Loop static func start(_ reports: RecordedReports) async throws -> HTTPTestServer {
        try await HTTPTestServer.start { router in
            let pool = PostgresPool(conninfo: "host=/nonexistent dbname=none", connectTimeoutMs: 1_000)
            let keys = APIKeys(appKeys: [], adminKeys: [Self.adminKey])
            let admin = router.group("/v1", KeyAuthentication(keys: keys)).group("/admin", AdminScope())
            let catalog = CatalogCache(db: pool)
            AdminRoutes(db: pool, catalog: catalog, events: EventRecorder(catalog: catalog, delivers: false), report: reports)
                .register(on: admin)
        }
    }

    /// `GET /v1/admin/reports/purchases` with `query`, as an admin.
    static func report(_ server: HTTPTestServer, _ query: String) async throws -> RawHTTPClient.Response {
        try await server.request("/v1/admin/reports/purchases" + query, headers: [("Authorization", "Bearer \(adminKey)")])
    }

    @Test @Loop func fromAndToDefaultToTheLast30Days() async throws {
        let reports = RecordedReports()
        let server = try await Self.start(reports)
        let started = Date()

        let lastMonth = try await Self.report(server, "")
        #expect(lastMonth.status == 200, "\(lastMonth.text)")
        let window = try #require(reports.asked.last)
        // A whole second, after every instant before the request (a purchase of this very second counts).
        #expect(window.to > started && window.to <= GrantStore.wholeSecond(Date()).addingTimeInterval(1))
        #expect(window.to == GrantStore.wholeSecond(window.to))
        #expect(window.to.timeIntervalSince(window.from) == 30 * 86_400)
        #expect(window.environment == nil)
        let body = try lastMonth.json()
        #expect(body["from"] as? String == RFC3339.string(from: window.from))
        #expect(body["to"] as? String == RFC3339.string(from: window.to))

        let untilApril = try await Self.report(server, "?to=2026-04-01T00:00:00Z&environment=Sandbox")
        #expect(untilApril.status == 200, "\(untilApril.text)")
        #expect(reports.asked.last?.from == RFC3339.date(from: "2026-03-02T00:00:00Z"))
        #expect(reports.asked.last?.to == RFC3339.date(from: "2026-04-01T00:00:00Z"))
        #expect(reports.asked.last?.environment == .sandbox)

        let sinceMarch = try await Self.report(server, "?from=2026-03-01T00:00:00Z")
        #expect(sinceMarch.status == 200, "\(sinceMarch.text)")
        #expect(reports.asked.last?.from == RFC3339.date(from: "2026-03-01T00:00:00Z"))
        let now = try #require(reports.asked.last?.to)
        #expect(now > started && now <= GrantStore.wholeSecond(Date()).addingTimeInterval(1))

        // A `from` after the defaulted `to` is refused before the report is read, naming `from` (given), not `to`.
        let future = try await Self.report(server, "?from=9999-01-01T00:00:00Z")
        #expect(future.status == 400, "\(future.text)")
        #expect(try future.json()["field"] as? String == "from")
        #expect(reports.asked.count == 3)
        await server.shutdown()
    }

    /// An `Accept` naming `text/csv` asks for CSV, unless `format=json` says otherwise.
    @Test @Loop func acceptTextCSVAnswersCSV() async throws {
        let server = try await Self.start(RecordedReports())
        let admin = ("Authorization", "Bearer \(Self.adminKey)")
        let csv = try await server.request("/v1/admin/reports/purchases", headers: [admin, ("Accept", "text/csv, */*;q=0.1")])
        #expect(csv.status == 200)
        #expect(csv.headers["Content-Type"] == "text/csv; charset=utf-8")
        #expect(csv.text == "product_id,environment,product_type,count,refunded,units,price,price_currency,revenue,trials\r\n")
        let json = try await server.request("/v1/admin/reports/purchases?format=json", headers: [admin, ("Accept", "text/csv")])
        #expect(json.headers["Content-Type"] == "application/json")
        await server.shutdown()
    }
}
