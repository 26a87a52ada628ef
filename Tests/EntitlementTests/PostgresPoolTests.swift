import Foundation
import Testing
@testable import AppStore
@testable import EntitlementService
@testable import FakeAppStore
@testable import ServiceRuntime

/// The connection pool and its transactions against the real server from `scripts/test.sh`.
@Suite struct PostgresPoolTests {
    @Loop func makePool(size: Int, acquireTimeoutMs: UInt64? = 10_000) throws -> PostgresPool {
        PostgresPool(conninfo: try TestDatabase.url(), size: size, acquireTimeoutMs: acquireTimeoutMs)
    }

    /// Takes the only connection of a size-1 pool and holds it until the returned `release` is called (which
    /// waits for it to be back).
    @Loop func holdTheOnlyConnection(of pool: PostgresPool) async -> @Loop () async throws -> Void {
        let (gate, open) = AsyncStream.makeStream(of: Void.self)
        let holder = Task { @Loop in
            try await pool.withConnection { _ in
                for await _ in gate { break }
            }
        }
        while pool.inUse == 0 { await Task.yield() }
        return {
            open.yield()
            try await holder.value
        }
    }

    /// A ping that gets no answer in its time fails then (`/readyz` answers 503), whatever holds it up: here the
    /// only connection is taken, as every connection is when the server has stopped answering.
    @Test @Loop func aPingFailsAtItsTimeout() async throws {
        // The only connection is taken before any came back: no answer within the ping's time counts for it.
        let pool = try makePool(size: 1)
        let release = await holdTheOnlyConnection(of: pool)
        await #expect {
            try await pool.ping(timeoutMs: 100)
        } throws: { error in
            (error as? PostgresError).map { $0.kind == .timeout && $0.message.contains("100 ms") } ?? false
        }
        try await release()
        try await pool.ping(timeoutMs: 2_000)
        await pool.close()
    }

    /// A pool whose every connection is lent out, one of them back within the ping's time, answers the ping at once:
    /// busy is not silent, and the ping does not queue behind the requests keeping it busy.
    @Test @Loop func aBusyPoolThatAnsweredLatelyPingsAtOnce() async throws {
        let pool = try makePool(size: 1)
        _ = try await pool.query("SELECT 1")
        let release = await holdTheOnlyConnection(of: pool)
        let started = ContinuousClock.now
        try await pool.ping(timeoutMs: 5_000)
        #expect(ContinuousClock.now - started < .seconds(1) && pool.inUse == 1)
        try await release()
        await pool.close()
    }

    /// The server refusing one more connection (a role's connection limit here, its max_connections in production)
    /// while others of the pool are open is no outage: the caller waits for one of them.
    @Test @Loop func aConnectionTheServerRefusesWhileOthersAreOpenIsWaitedFor() async throws {
        let role = "limited_" + String(randomToken().prefix(8)).lowercased()
        let admin = try await PostgresConnection.connect(try TestDatabase.url())
        defer { admin.close() }
        _ = try await admin.query("CREATE ROLE \(role) LOGIN CONNECTION LIMIT 1")
        do {
            let url = try TestDatabase.url() + (try TestDatabase.url().contains("?") ? "&" : "?") + "user=\(role)"
            let pool = PostgresPool(conninfo: url, size: 2)
            let release = await holdTheOnlyConnection(of: pool)
            let second = Task { @Loop in try await pool.query("SELECT 2 AS two").rows[0].int("two") }
            // Refused (the role's one connection is the pool's other), it waits: it must not have its own.
            #expect(try await eventually(timeout: 10, everyMs: 5) { pool.waiting == 1 && pool.inUse == 1 })
            try await release()
            #expect(try await second.value == 2)
            await pool.close()
        } catch {
            _ = try? await admin.query("DROP ROLE \(role)")
            throw error
        }
        _ = try await admin.query("DROP ROLE \(role)")
    }

    /// A server that cannot be reached fails every caller at once, however many wait: none is left spinning on
    /// slots the others hand on.
    @Test @Loop func anUnreachableServerFailsEveryCallerAtOnce() async throws {
        let pool = PostgresPool(conninfo: "host=127.0.0.1 port=\(try TestDatabase.freePort()) user=postgres dbname=none connect_timeout=2", size: 2)
        let started = ContinuousClock.now
        let callers = (0..<6).map { _ in Task { @Loop in try await pool.query("SELECT 1") } }
        for caller in callers {
            await #expect(throws: PostgresError.self) { _ = try await caller.value }
        }
        #expect(ContinuousClock.now - started < .seconds(5))
        await pool.close()
    }

    /// Records what callers saw of the pool while they ran.
    @Loop final class Observations {
        var maxWaiting = 0
        var maxInUse = 0
        var backends = Set<Int>()
        var order: [Int] = []

        /// Runs one query through the pool and notes the pool's counters as the caller sees them after it.
        func query(_ pool: PostgresPool, _ i: Int) async throws -> Int {
            let row = try await pool.query("SELECT $1::int + 1 AS next, pg_backend_pid() AS pid, pg_sleep(0.01)", i).rows[0]
            maxWaiting = max(maxWaiting, pool.waiting)
            maxInUse = max(maxInUse, pool.inUse)
            backends.insert(try row.int("pid"))
            return try row.int("next")
        }
    }

    @Test @Loop func fiftyConcurrentQueriesThroughFourConnections() async throws {
        let pool = try makePool(size: 4)
        let seen = Observations()
        let sums = try await withThrowingTaskGroup(of: Int.self) { group in
            for i in 0..<50 {
                group.addTask { try await seen.query(pool, i) }
            }
            var sum = 0
            for try await next in group { sum += next }
            return sum
        }
        #expect(sums == (1...50).reduce(0, +))
        #expect(seen.maxWaiting > 0, "callers should have queued behind four connections")
        #expect(seen.maxInUse <= 4)
        #expect(seen.backends.count <= 4)
        #expect(pool.inUse == 0 && pool.waiting == 0)
        await pool.close()
    }

    @Test @Loop func failedTransactionLeavesNothing() async throws {
        let pool = try makePool(size: 2)
        let table = TestDatabase.uniqueTableName("tx")
        _ = try await pool.query("CREATE TABLE \(table) (id int PRIMARY KEY, note text)")
        struct Abort: Error {}
        await #expect(throws: Abort.self) {
            try await pool.transaction { connection in
                _ = try await connection.query("INSERT INTO \(table) VALUES ($1, $2)", 1, "kept?")
                _ = try await connection.query("INSERT INTO \(table) VALUES ($1, $2)", 2, "kept?")
                throw Abort()
            }
        }
        await #expect {
            try await pool.transaction { connection in
                _ = try await connection.query("INSERT INTO \(table) VALUES ($1, $2)", 3, "kept?")
                _ = try await connection.query("INSERT INTO \(table) VALUES ($1, $2)", 3, "duplicate")
            }
        } throws: { ($0 as? PostgresError)?.isUniqueViolation ?? false }
        #expect(try await pool.query("SELECT count(*) AS n FROM \(table)").rows[0].int("n") == 0)

        let committed = try await pool.transaction(isolation: .serializable) { connection in
            try await connection.query("INSERT INTO \(table) VALUES ($1, $2) RETURNING id", 4, "kept").rows[0].int("id")
        }
        #expect(committed == 4)
        #expect(try await pool.query("SELECT note FROM \(table)").rows.map { try $0.string("note") } == ["kept"])
        _ = try await pool.query("DROP TABLE \(table)")
        await pool.close()
    }

    @Test @Loop func transactionThatSwallowedAnErrorDoesNotReportSuccess() async throws {
        let pool = try makePool(size: 1)
        await #expect {
            try await pool.transaction { connection in
                _ = try? await connection.query("SELECT 1/0")
            }
        } throws: { ($0 as? PostgresError)?.sqlState == "25P02" }
        #expect(try await pool.query("SELECT 1 AS one").rows[0].int("one") == 1)
        await pool.close()
    }

    @Test @Loop func pipelinedTransactionCommitsOrRollsBackAsAWhole() async throws {
        let pool = try makePool(size: 1)
        let table = TestDatabase.uniqueTableName("ptx")
        _ = try await pool.query("CREATE TABLE \(table) (id int PRIMARY KEY)")
        let results = try await pool.transaction([
            PostgresStatement("INSERT INTO \(table) VALUES ($1)", [1]),
            PostgresStatement("INSERT INTO \(table) VALUES ($1)", [2]),
            PostgresStatement("SELECT count(*) AS n FROM \(table)"),
        ])
        #expect(results.count == 3)
        #expect(try results[2].rows[0].int("n") == 2)

        await #expect {
            _ = try await pool.transaction([
                PostgresStatement("INSERT INTO \(table) VALUES ($1)", [3]),
                PostgresStatement("INSERT INTO \(table) VALUES ($1)", [1]),
            ])
        } throws: { ($0 as? PostgresError)?.isUniqueViolation ?? false }
        let ids = try await pool.query("SELECT id FROM \(table) ORDER BY id").rows.map { try $0.int("id") }
        #expect(ids == [1, 2])
        try await pool.withConnection { connection in
            #expect(connection.transactionStatus == .idle, "the failed transaction was rolled back before reuse")
        }
        _ = try await pool.query("DROP TABLE \(table)")
        await pool.close()
    }

    @Test @Loop func waitersAreServedFirstComeFirstServed() async throws {
        let pool = try makePool(size: 1, acquireTimeoutMs: nil)
        let release = await holdTheOnlyConnection(of: pool)
        let seen = Observations()
        var waiters: [Task<Void, Error>] = []
        for i in 0..<5 {
            waiters.append(Task { @Loop in
                try await pool.withConnection { _ in seen.order.append(i) }
            })
            while pool.waiting < i + 1 { await Task.yield() }
        }
        try await release()
        for waiter in waiters { try await waiter.value }
        #expect(seen.order == [0, 1, 2, 3, 4])
        await pool.close()
    }

    @Test @Loop func waitingForAConnectionTimesOutClearly() async throws {
        let pool = try makePool(size: 1, acquireTimeoutMs: 100)
        let release = await holdTheOnlyConnection(of: pool)
        let started = ContinuousClock.now
        do {
            _ = try await pool.query("SELECT 1")
            Issue.record("a second caller got the pool's only connection")
        } catch let error as PostgresError {
            #expect(error.kind == .timeout)
            #expect(error.message.contains("100 ms"))
        }
        #expect(ContinuousClock.now - started < .seconds(2))
        try await release()
        #expect(try await pool.query("SELECT 1 AS one").rows[0].int("one") == 1)
        await pool.close()
    }

    @Test @Loop func brokenConnectionIsReplaced() async throws {
        let pool = try makePool(size: 1)
        let first = try await pool.query("SELECT pg_backend_pid() AS pid").rows[0].int("pid")
        let killer = try await PostgresConnection.connect(try TestDatabase.url())
        defer { killer.close() }
        _ = try await killer.query("SELECT pg_terminate_backend($1::int)", first)
        var replacement: Int?
        for _ in 0..<5 where replacement == nil {
            replacement = try? await pool.query("SELECT pg_backend_pid() AS pid").rows[0].int("pid")
        }
        let second = try #require(replacement, "the pool did not recover from a terminated backend")
        #expect(second != first)
        await pool.close()
    }

    @Test @Loop func connectionReturnedInsideATransactionIsNotReused() async throws {
        let pool = try makePool(size: 1)
        let leaked = try await pool.withConnection { connection in
            _ = try await connection.query("BEGIN")
            return connection.backendPID
        }
        try await pool.withConnection { connection in
            #expect(connection.backendPID != leaked)
            #expect(connection.transactionStatus == .idle)
        }
        await pool.close()
    }

    @Test @Loop func closingFailsWaitersAndLaterCallers() async throws {
        let pool = try makePool(size: 1, acquireTimeoutMs: nil)
        let release = await holdTheOnlyConnection(of: pool)
        let waiter = Task { @Loop in try await pool.query("SELECT 1") }
        while pool.waiting == 0 { await Task.yield() }
        let closing = Task { @Loop in await pool.close() }
        await #expect(throws: PostgresError.self) { _ = try await waiter.value }
        try await release()
        await closing.value
        #expect(pool.inUse == 0)
        await #expect(throws: PostgresError.self) { _ = try await pool.query("SELECT 1") }
    }
}
