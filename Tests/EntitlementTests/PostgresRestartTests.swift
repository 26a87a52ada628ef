import Foundation
import Testing
@testable import AppStore
@testable import EntitlementService
@testable import FakeAppStore
@testable import ServiceRuntime

/// The pool across a server restart. The restart happens on a private cluster (see `PrivateServer`) so that
/// it cannot break tests running concurrently against the shared server.
@Suite struct PostgresRestartTests {
    @Test @Loop func poolRecoversAfterTheServerRestarts() async throws {
        let server = try await PrivateServer.start()
        do {
            try await recovers(on: server)
        } catch {
            await server.stop()
            throw error
        }
        await server.stop()
    }

    @Loop func recovers(on server: PrivateServer) async throws {
        let pool = PostgresPool(conninfo: server.url, size: 3, connectTimeoutMs: 5_000)

        // Open every connection so all of them are cut by the restart.
        let before = try await withThrowingTaskGroup(of: Int.self) { group in
            for _ in 0..<3 {
                group.addTask {
                    try await pool.query("SELECT pg_backend_pid() AS pid, pg_sleep(0.05)").rows[0].int("pid")
                }
            }
            var pids = Set<Int>()
            for try await pid in group { pids.insert(pid) }
            return pids
        }
        #expect(before.count == 3)

        try await server.restart()

        // Connections that have not yet seen the cut may fail one query each; then the pool reconnects.
        var failures: [PostgresError] = []
        var pid: Int?
        for _ in 0..<(pool.size + 2) where pid == nil {
            do {
                pid = try await pool.query("SELECT pg_backend_pid() AS pid").rows[0].int("pid")
            } catch let error as PostgresError {
                #expect(error.isConnectionFailure, "unexpected error after restart: \(error)")
                failures.append(error)
            }
        }
        let recovered = try #require(pid, "no query succeeded after the restart; errors: \(failures)")
        #expect(!before.contains(recovered))
        #expect(pool.inUse == 0)
        await pool.close()
    }
}
