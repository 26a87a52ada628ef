import Foundation
import Testing
@testable import ServiceRuntime

/// Read-only transactions through the pool: several waiting reads of one isolation share one round trip and one
/// read-only transaction, each with its own answer.
@Suite struct PostgresPoolReadTests {
    let pools = PostgresPoolTests()

    /// Queues `count` reads behind the only connection of `pool`, each given by `read(i)`, and returns their
    /// tasks once all are waiting.
    @Loop func queue(_ count: Int, on pool: PostgresPool, _ read: @escaping @Loop (Int) async throws -> [PostgresResult])
        async -> [Task<[PostgresResult], Error>] {
        var tasks: [Task<[PostgresResult], Error>] = []
        for i in 0..<count {
            tasks.append(Task { @Loop in try await read(i) })
            while pool.waiting < i + 1 { await Task.yield() }
        }
        return tasks
    }

    @Test @Loop func waitingReadsShareOneRoundTripEachWithItsOwnAnswer() async throws {
        let pool = try pools.makePool(size: 1, acquireTimeoutMs: nil)
        let release = await pools.holdTheOnlyConnection(of: pool)
        let reads = await queue(10, on: pool) { i in
            try await pool.readTransaction([
                PostgresStatement("SELECT $1::int * 10 AS tens", [i]),
                PostgresStatement("SELECT current_setting('transaction_read_only') AS read_only, "
                                  + "current_setting('transaction_isolation') AS isolation"),
            ], isolation: .repeatableRead)
        }
        try await release()
        for (i, read) in reads.enumerated() {
            let results = try await read.value
            #expect(results.count == 2)
            #expect(try results[0].rows[0].int("tens") == i * 10)
            #expect(try results[1].rows[0].string("read_only") == "on")
            #expect(try results[1].rows[0].string("isolation") == "repeatable read")
        }
        #expect(pool.readsAnsweredTogether == 9, "the first waiting read took the nine behind it")
        try await pool.withConnection { #expect($0.transactionStatus == .idle) }
        await pool.close()
    }

    @Test @Loop func readsSentTogetherShareOneTransactionAndAnotherIsolationWaitsForItsOwn() async throws {
        let pool = try pools.makePool(size: 1, acquireTimeoutMs: nil)
        let release = await pools.holdTheOnlyConnection(of: pool)
        let reads = await queue(5, on: pool) { i in
            try await pool.readTransaction([
                PostgresStatement("SELECT transaction_timestamp()::text AS started, current_setting('transaction_isolation') AS isolation"),
            ], isolation: i == 2 ? .readCommitted : .repeatableRead)
        }
        try await release()
        var started: [String] = []
        var isolations: [String] = []
        for read in reads {
            let row = try await read.value[0].rows[0]
            started.append(try row.string("started"))
            isolations.append(try row.string("isolation"))
        }
        #expect(isolations == ["repeatable read", "repeatable read", "read committed", "repeatable read", "repeatable read"])
        #expect(Set([started[0], started[1], started[3], started[4]]).count == 1, "the repeatable reads ran in one transaction")
        #expect(started[2] > started[0], "the read-committed read ran in a transaction of its own, after")
        #expect(pool.readsAnsweredTogether == 3)
        await pool.close()
    }

    @Test @Loop func aFailingReadFailsAloneAndTheOthersAreAnswered() async throws {
        let pool = try pools.makePool(size: 1, acquireTimeoutMs: nil)
        let release = await pools.holdTheOnlyConnection(of: pool)
        let reads = await queue(5, on: pool) { i in
            try await pool.readTransaction([PostgresStatement("SELECT 100 / $1::int AS quotient", [i - 2])])
        }
        try await release()
        for (i, read) in reads.enumerated() {
            if i == 2 {
                await #expect { _ = try await read.value } throws: { ($0 as? PostgresError)?.sqlState == "22012" }
            } else {
                #expect(try await read.value[0].rows[0].int("quotient") == 100 / (i - 2))
            }
        }
        try await pool.withConnection { #expect($0.transactionStatus == .idle) }
        await pool.close()
    }

    @Test @Loop func aReadCannotWrite() async throws {
        let pool = try pools.makePool(size: 1)
        let table = TestDatabase.uniqueTableName("rtx")
        _ = try await pool.query("CREATE TABLE \(table) (id int PRIMARY KEY)")
        await #expect {
            _ = try await pool.readTransaction([PostgresStatement("INSERT INTO \(table) VALUES (1)")])
        } throws: { ($0 as? PostgresError)?.sqlState == "25006" }
        #expect(try await pool.query("SELECT count(*) AS n FROM \(table)").rows[0].int("n") == 0)
        _ = try await pool.query("DROP TABLE \(table)")
        await pool.close()
    }

    @Test @Loop func aReadQueuedBehindAWriterGoesOutWithTheFirstReadAndTheWriterKeepsItsPlace() async throws {
        let pool = try pools.makePool(size: 1, acquireTimeoutMs: nil)
        let release = await pools.holdTheOnlyConnection(of: pool)
        let firstRead = Task { @Loop in try await pool.readTransaction([PostgresStatement("SELECT 1 AS one")]) }
        while pool.waiting < 1 { await Task.yield() }
        let writer = Task { @Loop in try await pool.withConnection { _ in pool.waiting } }
        while pool.waiting < 2 { await Task.yield() }
        let secondRead = Task { @Loop in try await pool.readTransaction([PostgresStatement("SELECT 2 AS two")]) }
        while pool.waiting < 3 { await Task.yield() }
        try await release()
        #expect(try await firstRead.value[0].rows[0].int("one") == 1)
        #expect(try await secondRead.value[0].rows[0].int("two") == 2)
        #expect(try await writer.value == 0, "the second read went out with the first, ahead of the writer")
        #expect(pool.readsAnsweredTogether == 1)
        await pool.close()
    }
}
