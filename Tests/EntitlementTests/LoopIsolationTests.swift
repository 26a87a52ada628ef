import Foundation
import Testing
@testable import AppStore
@testable import EntitlementService
@testable import FakeAppStore
@testable import ServiceRuntime

/// The loop is never blocked by the database: requests waiting on a lock wait in PostgreSQL and for their batch,
/// not on the loop thread.
@Suite(.serialized, .timeLimit(.minutes(2)))
@Loop
struct LoopIsolationTests {
    @Test func healthzAnswersQuicklyWhileTwentyRequestsWaitOnALock() async throws {
        try await ServiceHarness.run { service in
            let locker = try await PostgresConnection.connect(service.databaseURL)
            _ = try await locker.query("BEGIN", [])
            _ = try await locker.query("LOCK TABLE purchase_owners IN ACCESS EXCLUSIVE MODE", [])

            let poolSize = service.application.configuration.databaseReadPoolSize
            #expect(poolSize < 20, "the twenty requests must outnumber the read pool's connections")
            let misses = service.application.cache.misses
            let blocked = (0..<20).map { index in Task { try await service.request("GET", "/v1/users/locked-\(index)/entitlements") } }
            // Wait until the twenty requests have missed the cache and every one waits in PostgreSQL or for its
            // batch: every connection the read pool lent out is stuck on the lock (seen from outside the locking
            // transaction: pg_stat_activity is a snapshot per transaction; a worker of the main pool may wait on
            // it too), and either no read waits for a connection or every connection is lent.
            let pool = service.application.readPool
            let observer = try await PostgresConnection.connect(service.databaseURL)
            let deadline = RawHTTPClient.now() + 10
            var waiting = 0
            @Loop func settled() -> Bool {
                service.application.cache.misses - misses == 20 && pool.inUse >= 1 && waiting >= pool.inUse
                    && (pool.waiting == 0 || pool.inUse == poolSize)
            }
            while RawHTTPClient.now() < deadline {
                waiting = try await observer.query(
                    "SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()", []).rows[0].int("n")
                if settled() { break }
                await LoopTimer.sleep(milliseconds: 10)
            }
            observer.close()
            #expect(settled(), "\(waiting) waiting on the lock, \(pool.inUse) connections lent, \(pool.waiting) waiting for one")

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
