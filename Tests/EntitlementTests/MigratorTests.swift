import EntitlementModel
import Foundation
import Testing
@testable import AppStore
@testable import EntitlementService
@testable import FakeAppStore
@testable import ServiceRuntime

/// Migrations against a fresh database per test.
@Suite struct MigratorTests {
    /// A temporary migrations directory, removed by `remove()`.
    struct Directory {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("migrations-" + UUID().uuidString)

        init(_ files: [String: String]) throws {
            try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
            try add(files)
        }

        func add(_ files: [String: String]) throws {
            for (name, sql) in files {
                try sql.write(to: url.appendingPathComponent(name), atomically: true, encoding: .utf8)
            }
        }

        func remove() { try? FileManager.default.removeItem(at: url) }
    }

    @Test @Loop func appliesInNumericOrderOnce() async throws {
        let directory = try Directory([
            // 0002 and 0010 depend on 0001; a lexical order would still work, a wrong numeric one would not.
            "0010_c.sql": "ALTER TABLE items ADD COLUMN price int; INSERT INTO trail VALUES (10);",
            "0002_b.sql": "INSERT INTO items (name) VALUES ('first'), ('second'); INSERT INTO trail VALUES (2);",
            "0001_a.sql": """
                -- several statements, a dollar-quoted body and a semicolon inside a string
                CREATE TABLE items (id serial PRIMARY KEY, name text NOT NULL);
                CREATE TABLE trail (version int, at timestamptz DEFAULT clock_timestamp());
                CREATE FUNCTION shout(t text) RETURNS text AS $$ SELECT upper(t) || ';' $$ LANGUAGE sql;
                INSERT INTO trail VALUES (1);
                """,
            "README.md": "not a migration",
        ])
        defer { directory.remove() }
        try await TestDatabase.withTemporaryDatabase { url in
            let pool = PostgresPool(conninfo: url, size: 2)
            let migrator = Migrator(pool: pool, directory: directory.url)
            #expect(try await migrator.run() == [1, 2, 10])
            #expect(try await migrator.run() == [])

            let trail = try await pool.query("SELECT version FROM trail ORDER BY at").rows.map { try $0.int("version") }
            #expect(trail == [1, 2, 10])
            let recorded = try await pool.query("SELECT version, name, applied_at FROM schema_migrations ORDER BY version").rows
            #expect(try recorded.map { try $0.int("version") } == [1, 2, 10])
            #expect(try recorded.map { try $0.string("name") } == ["a", "b", "c"])
            #expect(try recorded.allSatisfy { abs(try $0.date("applied_at").timeIntervalSinceNow) < 60 })
            #expect(try await pool.query("SELECT shout('x') AS s").rows[0].string("s") == "X;")

            try directory.add(["0003_d.sql": "INSERT INTO trail VALUES (3);"])
            #expect(try await migrator.run() == [3], "a file added later below the newest version still applies")
            await pool.close()
        }
    }

    @Test @Loop func failedMigrationRollsBackAloneAndStopsTheRun() async throws {
        let directory = try Directory([
            "0001_ok.sql": "CREATE TABLE kept (id int);",
            "0002_broken.sql": "CREATE TABLE half (id int); INSERT INTO half VALUES ('not a number');",
            "0003_later.sql": "CREATE TABLE later (id int);",
        ])
        defer { directory.remove() }
        try await TestDatabase.withTemporaryDatabase { url in
            let pool = PostgresPool(conninfo: url, size: 1)
            let migrator = Migrator(pool: pool, directory: directory.url)
            do {
                _ = try await migrator.run()
                Issue.record("a broken migration was applied")
            } catch let error as MigrationError {
                #expect(error.description.contains("0002_broken"))
                #expect(error.underlying?.sqlState == "22P02")
            }
            let tables = try await pool.query("""
                SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' ORDER BY table_name
                """).rows.map { try $0.string("table_name") }
            #expect(tables == ["kept", "schema_migrations"])
            #expect(try await pool.query("SELECT version FROM schema_migrations").rows.map { try $0.int("version") } == [1])
            await pool.close()
        }
    }

    @Test @Loop func concurrentMigratorsApplyEachFileExactlyOnce() async throws {
        var files = ["0001_log.sql": "CREATE TABLE applications (version int NOT NULL);"]
        for version in 2...8 {
            files[String(format: "%04d_step.sql", version)] = "SELECT pg_sleep(0.02); INSERT INTO applications VALUES (\(version));"
        }
        let directory = try Directory(files)
        defer { directory.remove() }
        try await TestDatabase.withTemporaryDatabase { url in
            let pools = [PostgresPool(conninfo: url, size: 2), PostgresPool(conninfo: url, size: 2)]
            let runs = try await withThrowingTaskGroup(of: [Int].self) { group in
                for pool in pools {
                    group.addTask { try await Self.migrate(pool, directory.url) }
                }
                var runs: [[Int]] = []
                for try await run in group { runs.append(run) }
                return runs
            }
            let all = runs.flatMap { $0 }
            #expect(all.sorted() == Array(1...8), "each version applied by exactly one migrator: \(runs)")
            for run in runs { #expect(run == run.sorted()) }
            let counts = try await pools[0].query("SELECT version, count(*) AS n FROM applications GROUP BY version ORDER BY version").rows
            #expect(try counts.map { try $0.int("version") } == Array(2...8))
            #expect(try counts.allSatisfy { try $0.int("n") == 1 })
            for pool in pools { await pool.close() }
        }
    }

    @Test @Loop func recordedVersionWithoutAFileIsOnlyAWarning() async throws {
        let directory = try Directory(["0001_a.sql": "CREATE TABLE a (id int);", "0002_b.sql": "CREATE TABLE b (id int);"])
        defer { directory.remove() }
        try await TestDatabase.withTemporaryDatabase { url in
            let pool = PostgresPool(conninfo: url, size: 1)
            #expect(try await Migrator(pool: pool, directory: directory.url).run() == [1, 2])
            try FileManager.default.removeItem(at: directory.url.appendingPathComponent("0002_b.sql"))
            try directory.add(["0003_c.sql": "CREATE TABLE c (id int);"])
            #expect(try await Migrator(pool: pool, directory: directory.url).run() == [3])
            await pool.close()
        }
    }

    @Loop static func migrate(_ pool: PostgresPool, _ directory: URL) async throws -> [Int] {
        try await Migrator(pool: pool, directory: directory).run()
    }

    @Test func directoryProblemsAreReportedBeforeTouchingTheDatabase() throws {
        let misnamed = try Directory(["first.sql": "SELECT 1;"])
        defer { misnamed.remove() }
        #expect(throws: MigrationError.self) { try Migrator.migrations(in: misnamed.url) }

        let duplicate = try Directory(["0001_a.sql": "SELECT 1;", "1_b.sql": "SELECT 2;"])
        defer { duplicate.remove() }
        #expect(throws: MigrationError.self) { try Migrator.migrations(in: duplicate.url) }

        let signed = try Directory(["+1_a.sql": "SELECT 1;"])
        defer { signed.remove() }
        #expect(throws: MigrationError.self) { try Migrator.migrations(in: signed.url) }

        #expect(throws: MigrationError.self) {
            try Migrator.migrations(in: URL(fileURLWithPath: "/nonexistent/migrations"))
        }

        let empty = try Directory(["README.md": "no migration here"])
        defer { empty.remove() }
        #expect(throws: MigrationError.self) { try Migrator.migrations(in: empty.url) }
    }

    /// 0015 clears a price stored without its currency (and a currency without its price), which the catalog
    /// now refuses and would fail to load, and the table refuses them from then on.
    /// Migrates a new database to just before `version`, runs `seed` (rows an older service could write), then
    /// migrates the rest and hands the pool to `check`.
    @Loop private func upgrade(to version: Int, seed: String, check: (PostgresPool) async throws -> Void) async throws {
        let all = try FileManager.default.contentsOfDirectory(atPath: Migrator.defaultDirectory().path).filter { $0.hasSuffix(".sql") }
        let read = { (name: String) in try String(contentsOf: Migrator.defaultDirectory().appendingPathComponent(name), encoding: .utf8) }
        let prefix = String(format: "%04d", version)
        let directory = try Directory(Dictionary(uniqueKeysWithValues: try all.filter { $0 < prefix }.map { ($0, try read($0)) }))
        defer { directory.remove() }
        try await TestDatabase.withTemporaryDatabase { url in
            let pool = PostgresPool(conninfo: url, size: 2)
            let migrator = Migrator(pool: pool, directory: directory.url)
            _ = try await migrator.run()
            _ = try await pool.query(seed)
            try directory.add(Dictionary(uniqueKeysWithValues: try all.filter { $0 >= prefix }.map { ($0, try read($0)) }))
            #expect(try await migrator.run().contains(version))
            try await check(pool)
            await pool.close()
        }
    }

    @Test @Loop func pricesWithoutTheirCurrencyAreClearedAndRefused() async throws {
        try await upgrade(to: 15, seed: """
            INSERT INTO products (product_id, type, entitlements, price, price_currency) VALUES
                ('priced', 'non_consumable', '{a}', '4.99', 'USD'), ('bare', 'non_consumable', '{a}', '4.99', NULL),
                ('coinless', 'non_consumable', '{a}', NULL, 'EUR'), ('free', 'non_consumable', '{a}', NULL, NULL)
            """) { pool in
            let rows = try await pool.query("SELECT product_id, price, price_currency FROM products ORDER BY product_id").rows
            #expect(try rows.map { "\(try $0.string("product_id")):\(try $0.optionalString("price") ?? "-"):\(try $0.optionalString("price_currency") ?? "-")" }
                    == ["bare:-:-", "coinless:-:-", "free:-:-", "priced:4.99:USD"])
            await #expect(throws: PostgresError.self) {
                _ = try await pool.query("UPDATE products SET price_currency = NULL WHERE product_id = 'priced'")
            }
        }
    }

    /// Prices stored before 0017 are their products' first (from always); after it every change of price is
    /// recorded by the table, whoever writes it (an earlier release's instance knows nothing of the history).
    @Test @Loop func pricesGetAHistoryKeptByTheTable() async throws {
        try await upgrade(to: 17, seed: """
            INSERT INTO products (product_id, type, entitlements, price, price_currency) VALUES
                ('priced', 'non_consumable', '{a}', '4.99', 'USD'), ('free', 'non_consumable', '{a}', NULL, NULL)
            """) { pool in
            let history = { @Loop () async throws -> [String] in
                try await pool.query("""
                    SELECT product_id, valid_from = '-infinity' AS always, coalesce(price, '-') AS price FROM product_prices
                     ORDER BY product_id, valid_from
                    """).rows.map { "\(try $0.string("product_id")) \(try $0.bool("always") ? "always" : "now") \(try $0.string("price"))" }
            }
            #expect(try await history() == ["priced always 4.99"])
            _ = try await pool.query("UPDATE products SET price = '5.99' WHERE product_id = 'priced'")
            _ = try await pool.query("UPDATE products SET price = '5.99', entitlements = '{b}' WHERE product_id = 'priced'")  // no change of price
            _ = try await pool.query("UPDATE products SET price = '1.00', price_currency = 'EUR' WHERE product_id = 'free'")
            _ = try await pool.query("UPDATE products SET price = NULL, price_currency = NULL WHERE product_id = 'free'")
            #expect(try await history() == ["free always 1.00", "free now -", "priced always 4.99", "priced now 5.99"])
        }
    }

    @Test func defaultDirectoryIsNamedMigrations() {
        #expect(Migrator.defaultDirectory().lastPathComponent == "migrations")
    }
}
