import Foundation
import Testing
@testable import AppStore
@testable import EntitlementService
@testable import FakeAppStore
@testable import ServiceRuntime

/// One connection against the real server from `scripts/test.sh`.
@Suite struct PostgresConnectionTests {
    @Loop func connect(statementTimeoutMs: Int? = nil) async throws -> PostgresConnection {
        try await PostgresConnection.connect(try TestDatabase.url(), timeoutMs: 5_000, statementTimeoutMs: statementTimeoutMs)
    }

    @Test @Loop func hostileStringsRoundTripUnchanged() async throws {
        let connection = try await connect()
        defer { connection.close() }
        let table = TestDatabase.uniqueTableName("strings")
        _ = try await connection.query("CREATE TEMP TABLE \(table) (id int, value text)")
        let values = [
            "it's", "\"double\"", #"back\slash \\ \n"#, "'; DROP TABLE \(table); --", "$1 $2 ?", "",
            "ünïcödé ✓ 日本語 🎉", "line\nbreak\ttab\r", String(repeating: "x", count: 100_000),
        ]
        for (id, value) in values.enumerated() {
            _ = try await connection.query("INSERT INTO \(table) (id, value) VALUES ($1, $2)", id, value)
        }
        let rows = try await connection.query("SELECT value FROM \(table) ORDER BY id").rows
        #expect(try rows.map { try $0.string("value") } == values)
        let echoed = try await connection.query("SELECT $1::text AS v", "'; DROP TABLE \(table); --")
        #expect(echoed.rows.first?["v"] == "'; DROP TABLE \(table); --")
    }

    /// A server that sends nothing for the answer timeout while a request waits (here, busy in `pg_sleep`; in
    /// production, stopped) fails the request with `.timeout` and closes the connection, rather than holding the
    /// caller forever; answers inside it pass, and without a timeout a long silence is waited out.
    @Test @Loop func aSilentServerFailsTheRequestAtTheAnswerTimeout() async throws {
        let connection = try await connect()
        connection.answerTimeoutMs = 300
        #expect(try await connection.query("SELECT pg_sleep(0.05), 1 AS one").rows.first?.int("one") == 1)
        await #expect {
            _ = try await connection.query("SELECT pg_sleep(5)")
        } throws: { error in
            (error as? PostgresError).map { $0.kind == .timeout && $0.message.contains("300 ms") } ?? false
        }
        #expect(connection.isClosed)

        let patient = try await connect()
        defer { patient.close() }
        #expect(try await patient.query("SELECT pg_sleep(0.5), 2 AS two").rows.first?.int("two") == 2)
    }

    @Test @Loop func nulByteIsRejectedAndTheConnectionStaysUsable() async throws {
        let connection = try await connect()
        defer { connection.close() }
        await #expect {
            _ = try await connection.query("SELECT $1::text", "before\u{0}after")
        } throws: { error in
            (error as? PostgresError).map { $0.kind == .invalidParameter && $0.message.contains("NUL") } ?? false
        }
        #expect(try await connection.query("SELECT 1 AS one").rows.first?.int("one") == 1)
    }

    @Test @Loop func nullsBindAndRead() async throws {
        let connection = try await connect()
        defer { connection.close() }
        let row = try #require(try await connection.query(
            "SELECT $1::text AS s, $2::bigint AS i, $3::timestamptz AS d, NULL::bool AS b",
            String?.none, Int?.none, Date?.none).rows.first)
        #expect(row["s"] == nil && row["i"] == nil)
        #expect(try row.optionalString("s") == nil)
        #expect(try row.optionalInt("i") == nil)
        #expect(try row.optionalDate("d") == nil)
        #expect(try row.optionalBool("b") == nil)
        #expect(throws: PostgresError.self) { try row.int("i") }
        #expect(throws: PostgresError.self) { try row.string("no_such_column") }
    }

    @Test @Loop func everyParameterTypeRoundTrips() async throws {
        let connection = try await connect()
        defer { connection.close() }
        let date = Date(timeIntervalSince1970: 1_795_310_400.123)
        let bytes: [UInt8] = Array(0...255)
        let uuid = UUID()
        let row = try #require(try await connection.query("""
            SELECT $1::text AS s, $2 AS i, $3 AS i64, $4 AS i32, $5 AS b, $6 AS d, $7 AS nan, $8 AS ts,
                   $9 AS bytes, $10 AS data, $11 AS u, $12 AS j, $13 AS big, $14 AS small, $15 AS f
            """,
            "text", 42, Int64.max, Int32.min, true, 0.1, Double.nan, date,
            bytes, Data([1, 2, 3]), uuid, PostgresJSON(#"{"b": [1, 2], "a": "x"}"#), Int.max, Int.min, false).rows.first)
        #expect(try row.string("s") == "text")
        #expect(try row.int("i") == 42)
        #expect(try row.int64("i64") == Int64.max)
        #expect(try row.int("i32") == Int(Int32.min))
        #expect(try row.bool("b") == true)
        #expect(try row.bool("f") == false)
        #expect(try row.double("d") == 0.1)
        #expect(try row.double("nan").isNaN)
        #expect(abs(try row.date("ts").timeIntervalSince(date)) < 0.001)
        #expect(try row.bytes("bytes") == bytes)
        #expect(try row.bytes("data") == [1, 2, 3])
        #expect(try row.uuid("u") == uuid)
        #expect(try row.string("j") == #"{"a": "x", "b": [1, 2]}"#, "jsonb normalises key order")
        #expect(try row.int("big") == Int.max)
        #expect(try row.int("small") == Int.min)
        #expect(throws: PostgresError.self) { try row.int("s") }
        #expect(throws: PostgresError.self) { try row.bool("i") }
    }

    @Test @Loop func parameterListsResolveAsExpected() async throws {
        let connection = try await connect()
        defer { connection.close() }
        // An array literal of integers is a parameter list, not one bytea value.
        #expect(try await connection.query("SELECT $1::int + $2::int AS s", [1, 2]).rows[0].int("s") == 3)
        let existential: [any PostgresEncodable & Sendable] = [1, "two"]
        #expect(try await connection.query("SELECT $1::int AS a, $2::text AS b", existential).rows[0].string("b") == "two")
        #expect(try await connection.query("SELECT 7 AS seven").rows[0].int("seven") == 7)
        let bytes: [UInt8] = [1, 2]
        #expect(try await connection.query("SELECT length($1) AS n", bytes).rows[0].int("n") == 2)
    }

    @Test @Loop func timestampsReadInAnyTimeZone() async throws {
        let connection = try await connect()
        defer { connection.close() }
        let date = Date(timeIntervalSince1970: 1_795_310_400.5)
        for zone in ["UTC", "Asia/Kolkata", "America/St_Johns", "Pacific/Chatham"] {
            _ = try await connection.query("SELECT set_config('TimeZone', $1, false)", zone)
            let row = try #require(try await connection.query("SELECT $1::timestamptz AS t, $1::timestamptz::text AS raw", date).rows.first)
            #expect(abs(try row.date("t").timeIntervalSince(date)) < 0.000_1, "TimeZone \(zone) printed \(row["raw"] ?? "NULL")")
        }
    }

    /// A database whose default zone has daylight saving (as initdb picks up from a host's clock) still gets
    /// UTC sessions: a day added across the change of clocks is 24 hours.
    @Test @Loop func sessionsRunInUTCWhateverTheDatabaseDefault() async throws {
        try await TestDatabase.withTemporaryDatabase { url in
            let admin = try await PostgresConnection.connect(url, timeoutMs: 5_000)
            defer { admin.close() }
            _ = try await admin.query("DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET timezone = ''America/New_York''', current_database()); END $$")
            let connection = try await PostgresConnection.connect(url, timeoutMs: 5_000)
            defer { connection.close() }
            let row = try #require(try await connection.query("""
                SELECT current_setting('TimeZone') AS zone, '2026-11-01T00:00:00Z'::timestamptz + interval '1 day' AS next
                """).rows.first)
            #expect(try row.string("zone") == "UTC")
            #expect(try row.date("next") == Date(timeIntervalSince1970: 1_793_577_600))
        }
    }

    @Test @Loop func serverErrorsCarrySQLStateMessageAndDetail() async throws {
        let connection = try await connect()
        defer { connection.close() }
        let table = TestDatabase.uniqueTableName("uniq")
        _ = try await connection.query("CREATE TEMP TABLE \(table) (id int CONSTRAINT \(table)_pkey PRIMARY KEY)")
        _ = try await connection.query("INSERT INTO \(table) VALUES ($1)", 1)
        do {
            _ = try await connection.query("INSERT INTO \(table) VALUES ($1)", 1)
            Issue.record("a duplicate key was accepted")
        } catch let error as PostgresError {
            #expect(error.isUniqueViolation)
            #expect(error.kind == .server && error.sqlState == "23505")
            #expect(error.message.contains("duplicate key"))
            #expect(error.detail == "Key (id)=(1) already exists.")
            #expect(error.constraint == "\(table)_pkey")
            #expect(!error.isConnectionFailure)
        }
        await #expect {
            _ = try await connection.query("SELEKT 1")
        } throws: { ($0 as? PostgresError)?.sqlState == "42601" }
        #expect(connection.isUsable && connection.transactionStatus == .idle)
    }

    @Test @Loop func statementTimeoutSurfacesAsAnErrorAndKeepsTheConnection() async throws {
        let connection = try await connect(statementTimeoutMs: 100)
        defer { connection.close() }
        await #expect {
            _ = try await connection.query("SELECT pg_sleep(10)")
        } throws: { error in
            guard let error = error as? PostgresError else { return false }
            return error.isTimeout && error.sqlState == "57014"
        }
        #expect(try await connection.query("SELECT 2 AS two").rows.first?.int("two") == 2)
    }

    @Test @Loop func concurrentRequestsOnOneConnectionRunInOrder() async throws {
        let connection = try await connect()
        defer { connection.close() }
        let answers = try await withThrowingTaskGroup(of: (Int, Int).self) { group in
            for i in 0..<20 {
                group.addTask {
                    (i, try await connection.query("SELECT $1::int * 2 AS doubled", i).rows[0].int("doubled"))
                }
            }
            var answers: [Int: Int] = [:]
            for try await (i, doubled) in group { answers[i] = doubled }
            return answers
        }
        #expect(answers == Dictionary(uniqueKeysWithValues: (0..<20).map { ($0, $0 * 2) }))
    }

    @Test @Loop func simpleQueryRunsScripts() async throws {
        let connection = try await connect()
        defer { connection.close() }
        let table = TestDatabase.uniqueTableName("script")
        let results = try await connection.simpleQuery("""
            CREATE TEMP TABLE \(table) (n int);
            INSERT INTO \(table) VALUES (1), (2), (3);
            SELECT sum(n) AS total FROM \(table);
            """)
        #expect(results.count == 3)
        #expect(results[1].affectedRows == 3)
        #expect(try results[2].rows.first?.int("total") == 6)
        await #expect(throws: PostgresError.self) {
            _ = try await connection.simpleQuery("SELECT 1; SELECT 1/0; SELECT 3")
        }
    }

    @Test @Loop func pipelineSendsABatchInOneRoundTrip() async throws {
        let connection = try await connect()
        defer { connection.close() }
        let table = TestDatabase.uniqueTableName("pipe")
        _ = try await connection.query("CREATE TEMP TABLE \(table) (id int PRIMARY KEY, name text)")
        let results = try await connection.pipeline([
            PostgresStatement("INSERT INTO \(table) VALUES ($1, $2)", [1, "one"]),
            PostgresStatement("INSERT INTO \(table) VALUES ($1, $2)", [2, "two"]),
            PostgresStatement("SELECT count(*) AS n FROM \(table)"),
        ])
        #expect(results.map(\.command) == ["INSERT 0 1", "INSERT 0 1", "SELECT 1"])
        #expect(try results[2].rows[0].int("n") == 2)

        // A failure skips the rest; the batch is one implicit transaction, so nothing of it stays.
        await #expect {
            _ = try await connection.pipeline([
                PostgresStatement("INSERT INTO \(table) VALUES ($1, $2)", [3, "three"]),
                PostgresStatement("INSERT INTO \(table) VALUES ($1, $2)", [1, "again"]),
                PostgresStatement("INSERT INTO \(table) VALUES ($1, $2)", [4, "four"]),
            ])
        } throws: { ($0 as? PostgresError)?.isUniqueViolation ?? false }
        #expect(connection.isUsable && connection.transactionStatus == .idle)
        #expect(try await connection.query("SELECT count(*) AS n FROM \(table)").rows[0].int("n") == 2)
        #expect(try await connection.pipeline([]).isEmpty)
    }

    @Test @Loop func pipelinedStatementsArePreparedOncePerConnection() async throws {
        let connection = try await connect()
        defer { connection.close() }
        let lookup = "SELECT $1::int + 1 AS next"
        let echo = "SELECT $1::text AS echoed"
        for round in 0..<3 {
            let results = try await connection.pipeline([
                PostgresStatement(lookup, [round]), PostgresStatement(echo, ["it's \(round)"]), PostgresStatement(lookup, [round * 10]),
            ])
            #expect(results.count == 3)
            #expect(try results[0].rows[0].int("next") == round + 1)
            #expect(try results[1].rows[0].string("echoed") == "it's \(round)")
            #expect(try results[2].rows[0].int("next") == round * 10 + 1)
        }
        // Each distinct text was prepared once, whatever the repeats within and across pipelines.
        let prepared = try await connection.query("SELECT count(*)::int AS n FROM pg_prepared_statements", []).rows[0].int("n")
        #expect(prepared == 2)
        // A statement whose execution failed was prepared all the same; next time it answers correctly.
        await #expect(throws: PostgresError.self) {
            _ = try await connection.pipeline([PostgresStatement("SELECT 1/$1::int AS q", [0])])
        }
        #expect(try await connection.pipeline([PostgresStatement("SELECT 1/$1::int AS q", [1])])[0].rows[0].int("q") == 1)
    }

    /// A column's type changed under prepared statements (a migration run by another process) fails them once
    /// with `0A000`; the connection prepares them again from the next use on instead of failing for good.
    @Test @Loop func aStatementPreparedBeforeAColumnTypeChangeIsPreparedAgain() async throws {
        let connection = try await connect()
        defer { connection.close() }
        let table = TestDatabase.uniqueTableName("retyped")
        let migrator = try await connect()
        defer { migrator.close() }
        _ = try await migrator.query("CREATE TABLE \(table) (id int PRIMARY KEY, quantity int NOT NULL)")
        _ = try await migrator.query("INSERT INTO \(table) VALUES (1, 5)")
        let read = PostgresStatement("SELECT * FROM \(table) WHERE id = $1", [1])
        #expect(try await connection.pipeline([read])[0].rows[0].int("quantity") == 5)
        _ = try await migrator.query("ALTER TABLE \(table) ALTER COLUMN quantity TYPE bigint")
        await #expect { _ = try await connection.pipeline([read]) } throws: { ($0 as? PostgresError)?.isStalePreparedPlan == true }
        #expect(try await connection.pipeline([read])[0].rows[0].int("quantity") == 5)
        _ = try await migrator.query("DROP TABLE \(table)")
    }

    /// What a failed pipeline prepared before its failure stays prepared on the server and is used from then
    /// on: the next pipelines prepare nothing twice. A statement that did not parse is not recorded.
    @Test @Loop func aFailedPipelineKeepsWhatItPrepared() async throws {
        let connection = try await connect()
        defer { connection.close() }
        let double = "SELECT $1::int * 2 AS doubled"
        let divide = "SELECT 10 / $1::int AS q"
        await #expect(throws: PostgresError.self) {
            _ = try await connection.pipeline([PostgresStatement(double, [1]), PostgresStatement(divide, [0]), PostgresStatement("SELEC 1")])
        }
        await #expect(throws: PostgresError.self) {
            _ = try await connection.pipeline([PostgresStatement(double, [2]), PostgresStatement("SELEC 1")])
        }
        let statements = { @Loop in
            try await connection.query("SELECT name FROM pg_prepared_statements ORDER BY name", []).rows.map { try $0.string("name") }
        }
        let prepared = try await statements()
        #expect(prepared.count == 2, "\(prepared)")
        let results = try await connection.pipeline([PostgresStatement(double, [21]), PostgresStatement(divide, [5])])
        #expect(try results[0].rows[0].int("doubled") == 42 && results[1].rows[0].int("q") == 2)
        #expect(try await statements() == prepared)
        #expect(connection.isUsable && connection.transactionStatus == .idle)
    }

    @Test @Loop func connectionIdentifiesItself() async throws {
        let connection = try await connect()
        defer { connection.close() }
        let row = try #require(try await connection.query("SELECT current_setting('application_name') AS app, pg_backend_pid() AS pid").rows.first)
        #expect(try row.string("app") == "entitlement-service")
        #expect(try row.int("pid") == Int(connection.backendPID))
    }

    @Test @Loop func hostNamesAreResolvedWithoutBlocking() async throws {
        let url = try TestDatabase.url()
        guard var components = URLComponents(string: url), components.host == "127.0.0.1" else {
            Issue.record("TEST_DATABASE_URL is expected to be a postgresql://…@127.0.0.1 URI, got another form")
            return
        }
        components.host = "localhost"
        let connection = try await PostgresConnection.connect(try #require(components.string), timeoutMs: 5_000)
        defer { connection.close() }
        #expect(try await connection.query("SELECT 1 AS one").rows[0].int("one") == 1)
        await #expect(throws: PostgresError.self) {
            _ = try await PostgresConnection.connect("host=no-such-host.invalid port=5432", timeoutMs: 5_000)
        }
    }

    @Test @Loop func connectMovesOnToTheNextHostOnANewSocket() async throws {
        let url = try TestDatabase.url()
        guard let components = URLComponents(string: url), let port = components.port else {
            Issue.record("TEST_DATABASE_URL is expected to be a postgresql:// URI with a port")
            return
        }
        let refused = try TestDatabase.freePort()
        // libpq closes the refused socket and opens another for the second host while we poll.
        let connection = try await PostgresConnection.connect(
            "host=127.0.0.1,127.0.0.1 port=\(refused),\(port) user=\(components.user ?? "postgres") dbname=postgres",
            timeoutMs: 5_000)
        defer { connection.close() }
        #expect(try await connection.query("SELECT current_setting('port') AS port").rows[0].int("port") == port)
    }

    @Test @Loop func largeRequestsFlushInPieces() async throws {
        let connection = try await connect()
        defer { connection.close() }
        let big = String(repeating: "0123456789abcdef", count: 1 << 19)  // 8 MiB, more than a socket buffer
        #expect(try await connection.query("SELECT length($1::text) AS n", big).rows[0].int("n") == big.utf8.count)

        let chunk = String(repeating: "x", count: 4_096)
        let statements = (0..<2_000).map { PostgresStatement("SELECT $1::int AS i, length($2::text) AS n", [$0, chunk]) }
        let results = try await connection.pipeline(statements)
        #expect(results.count == 2_000)
        #expect(try results.enumerated().allSatisfy { i, result in
            try result.rows[0].int("i") == i && result.rows[0].int("n") == 4_096
        })
    }

    @Test @Loop func droppedConnectionIsFinishedAnyway() async throws {
        let observer = try await connect()
        defer { observer.close() }
        var pid: Int32 = 0
        do {
            let forgotten = try await connect()
            pid = forgotten.backendPID
        }
        // The backend leaves pg_stat_activity once it has seen the connection end, which takes the server a
        // moment of its own: polled until then, within a generous deadline.
        var gone = false
        let deadline = ContinuousClock.now + .seconds(10)
        while !gone && ContinuousClock.now < deadline {
            gone = try await observer.query("SELECT count(*) AS n FROM pg_stat_activity WHERE pid = $1", Int(pid)).rows[0].int("n") == 0
            if !gone { await LoopTimer.sleep(milliseconds: 10) }
        }
        #expect(gone, "backend \(pid) still connected 10 s after its connection object was released")
    }

    @Test @Loop func closedConnectionFailsRequestsClearly() async throws {
        let connection = try await connect()
        connection.close()
        #expect(connection.isClosed && !connection.isUsable)
        await #expect {
            _ = try await connection.query("SELECT 1")
        } throws: { ($0 as? PostgresError)?.isConnectionFailure ?? false }
    }

    @Test @Loop func refusedConnectionFailsQuicklyWithLibpqsMessage() async throws {
        let port = try TestDatabase.freePort()
        let started = ContinuousClock.now
        do {
            _ = try await PostgresConnection.connect("host=127.0.0.1 port=\(port) user=postgres", timeoutMs: 5_000)
            Issue.record("connected to a port nobody listens on")
        } catch let error as PostgresError {
            #expect(error.kind == .connection && error.isConnectionFailure)
            #expect(error.message.contains("refused"), "message: \(error.message)")
        }
        #expect(ContinuousClock.now - started < .seconds(2))
        await #expect(throws: PostgresError.self) {
            _ = try await PostgresConnection.connect("host=127.0.0.1 port=not-a-number")
        }
        await #expect(throws: PostgresError.self) {
            _ = try await PostgresConnection.connect("this is = not = conninfo")
        }
    }

    @Test @Loop func silentServerHitsTheConnectTimeout() async throws {
        let listener = try Listener()
        defer { listener.close() }
        let started = ContinuousClock.now
        await #expect {
            _ = try await PostgresConnection.connect("host=127.0.0.1 port=\(listener.port) user=postgres", timeoutMs: 200)
        } throws: { error in
            guard let error = error as? PostgresError else { return false }
            return error.kind == .timeout && error.isTimeout
        }
        #expect(ContinuousClock.now - started < .seconds(3))
    }

    @Test @Loop func queryWaitingOnALockLeavesTheLoopFree() async throws {
        let holder = try await connect()
        let waiter = try await connect(statementTimeoutMs: 10_000)
        let observer = try await connect()
        defer {
            holder.close()
            waiter.close()
            observer.close()
        }
        let table = TestDatabase.uniqueTableName("locked")
        _ = try await holder.query("CREATE TABLE \(table) (n int)")
        _ = try await holder.query("BEGIN")
        _ = try await holder.query("LOCK TABLE \(table) IN ACCESS EXCLUSIVE MODE")

        var finished = false
        let blocked = Task { @Loop in
            defer { finished = true }
            return try await waiter.query("SELECT count(*) AS n FROM \(table)")
        }
        // Until the server reports the waiter's backend as waiting for the lock (bounded).
        var waiting = false
        for _ in 0..<200 where !waiting {
            waiting = try await observer.query(
                "SELECT wait_event_type = 'Lock' AS waiting FROM pg_stat_activity WHERE pid = $1", Int(waiter.backendPID)
            ).rows.first?.optionalBool("waiting") ?? false  // NULL until the backend waits at all
        }
        try #require(waiting, "the second connection never started waiting for the lock")

        // A client that blocked the loop would hold it until the statement timeout (10 s) ended the wait, so
        // the timer could only fire after the query had finished, and late. On a busy machine "on time" gets
        // some slack.
        let before = ContinuousClock.now
        await LoopTimer.sleep(milliseconds: 50)
        let elapsed = ContinuousClock.now - before
        #expect(!finished, "the timer fired only after the waiting query had ended")
        #expect(elapsed < .seconds(3), "a 50 ms timer took \(elapsed) while a query waited on a lock")

        _ = try await holder.query("COMMIT")
        #expect(try await blocked.value.rows[0].int("n") == 0)
        _ = try await holder.query("DROP TABLE \(table)")
    }
}
