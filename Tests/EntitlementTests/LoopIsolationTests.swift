import Foundation
import Testing
@testable import AppStore
@testable import EntitlementService
@testable import FakeAppStore
@testable import ServiceRuntime

/// The loop is never blocked by the database: requests waiting on a lock wait in PostgreSQL and in the pool,
/// not on the loop thread.
@Suite(.serialized, .timeLimit(.minutes(2)))
@Loop
struct LoopIsolationTests {
    @Test func healthzAnswersQuicklyWhileTwentyRequestsWaitOnALock() async throws {
        try await ServiceHarness.run { service in
            let locker = try await PostgresConnection.connect(service.databaseURL)
            _ = try await locker.query("BEGIN", [])
            _ = try await locker.query("LOCK TABLE purchase_owners IN ACCESS EXCLUSIVE MODE", [])

            let poolSize = service.application.configuration.databasePoolSize
            #expect(poolSize < 20, "the twenty requests must outnumber the pool's connections")
            let blocked = (0..<20).map { index in Task { try await service.request("GET", "/v1/users/locked-\(index)/entitlements") } }
            // Wait until the pool's connections are all stuck on the lock (seen from outside the locking
            // transaction: pg_stat_activity is a snapshot per transaction).
            let observer = try await PostgresConnection.connect(service.databaseURL)
            let deadline = RawHTTPClient.now() + 10
            var waiting = 0
            while RawHTTPClient.now() < deadline {
                waiting = try await observer.query(
                    "SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()", []).rows[0].int("n")
                if waiting >= poolSize { break }
                await LoopTimer.sleep(milliseconds: 10)
            }
            observer.close()
            #expect(waiting >= poolSize)
            #expect(service.application.pool.inUse == poolSize)

            var slowest = 0.0
            for _ in 0..<10 {
                let started = RawHTTPClient.now()
                let health = try await service.request("GET", "/healthz", key: nil)
                slowest = max(slowest, RawHTTPClient.now() - started)
                #expect(health.status == 200)
            }
            #expect(slowest < 0.1, "slowest /healthz took \(slowest) s")

            _ = try await locker.query("ROLLBACK", [])
            locker.close()
            for request in blocked {
                #expect(try await request.value.status == 200)
            }
        }
    }
}
