import Foundation

/// One schema migration: the file `NNNN_name.sql`.
public struct Migration: Sendable, Equatable {
    /// The numeric prefix; migrations apply in ascending order.
    public let version: Int
    /// The rest of the file name, without `.sql`.
    public let name: String
    /// The file name, for messages.
    public let file: String
    /// The file's SQL, run as one script (several statements allowed).
    public let sql: String
}

/// A migration directory that cannot be used, or a migration that failed (with the server's error).
public struct MigrationError: Error, CustomStringConvertible {
    /// What went wrong, naming the file.
    public let description: String
    /// The database error behind a failed migration, if any.
    public let underlying: PostgresError?

    init(_ description: String, underlying: PostgresError? = nil) {
        self.description = description
        self.underlying = underlying
    }
}

/// Applies the SQL files of a migrations directory that the database has not seen yet.
///
/// Each file runs once, in numeric order, in its own transaction together with its row in
/// `schema_migrations(version, name, applied_at)`. Every transaction first takes a transaction-scoped
/// advisory lock and re-checks `schema_migrations`, so instances starting at the same moment apply each file
/// exactly once between them, and a crash never leaves the lock held.
@Loop
public final class Migrator {
    /// Key of the advisory lock that serialises migrators on one database ("entitlem" in ASCII).
    static let lockKey: Int64 = 0x656E_7469_746C_656D

    /// The directory the migration files are read from.
    public let directory: URL
    private let pool: PostgresPool

    /// A migrator applying `directory`'s files through `pool`; see `defaultDirectory()`.
    public init(pool: PostgresPool, directory: URL) {
        self.pool = pool
        self.directory = directory
    }

    /// `migrations` in the working directory when it exists, else the repository's `migrations` folder as
    /// located from this source file at build time.
    public nonisolated static func defaultDirectory(fileManager: FileManager = .default) -> URL {
        let local = URL(fileURLWithPath: fileManager.currentDirectoryPath).appendingPathComponent("migrations")
        var isDirectory: ObjCBool = false
        if fileManager.fileExists(atPath: local.path, isDirectory: &isDirectory), isDirectory.boolValue {
            return local
        }
        // #filePath is <repo>/Sources/ServiceRuntime/Database/Migrator.swift.
        return URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("migrations")
    }

    /// Reads and orders the directory's `NNNN_name.sql` files; other files are ignored.
    /// - Throws: `MigrationError` for a missing directory, a `.sql` file not named `NNNN_name.sql`, or two
    ///   files with one version.
    public nonisolated static func migrations(in directory: URL) throws -> [Migration] {
        let names: [String]
        do {
            names = try FileManager.default.contentsOfDirectory(atPath: directory.path)
        } catch {
            throw MigrationError("cannot read the migrations directory \(directory.path): \(error.localizedDescription)")
        }
        var migrations: [Migration] = []
        for file in names where file.hasSuffix(".sql") && !file.hasPrefix(".") {
            let stem = file.dropLast(".sql".count)
            guard let separator = stem.firstIndex(of: "_"),
                  stem[..<separator].allSatisfy({ ("0"..."9").contains($0) }), let version = Int(stem[..<separator]),
                  stem.index(after: separator) < stem.endIndex
            else {
                throw MigrationError("migration file \(file) is not named NNNN_name.sql")
            }
            let sql: String
            do {
                sql = try String(contentsOf: directory.appendingPathComponent(file), encoding: .utf8)
            } catch {
                throw MigrationError("cannot read migration file \(file): \(error.localizedDescription)")
            }
            if let clash = migrations.first(where: { $0.version == version }) {
                throw MigrationError("migration files \(clash.file) and \(file) share version \(version)")
            }
            migrations.append(Migration(version: version, name: String(stem[stem.index(after: separator)...]), file: file, sql: sql))
        }
        // A directory without one is a wrong MIGRATIONS_DIR, not a schema: a service started on it would answer 500
        // to every request that needs a table.
        guard !migrations.isEmpty else { throw MigrationError("the migrations directory \(directory.path) holds no NNNN_name.sql file") }
        return migrations.sorted { $0.version < $1.version }
    }

    /// Applies every pending migration and returns the versions this call applied, in order.
    /// Versions recorded in the database without a file are logged as a warning and left alone.
    /// - Throws: `MigrationError`; the failing migration's transaction is rolled back, earlier ones stay.
    public func run() async throws -> [Int] {
        let migrations = try Self.migrations(in: directory)
        try await createTable()
        let recorded = try await pool.query("SELECT version FROM schema_migrations ORDER BY version")
        let known = Set(migrations.map(\.version))
        var done = Set<Int>()
        for row in recorded.rows {
            let version = try row.int("version")
            done.insert(version)
            if !known.contains(version) {
                Log.warning("migration_file_missing", ["version": version, "directory": directory.path])
            }
        }
        var applied: [Int] = []
        for migration in migrations where !done.contains(migration.version) {
            if try await apply(migration) { applied.append(migration.version) }
        }
        return applied
    }

    private func createTable() async throws {
        do {
            _ = try await pool.transaction([
                PostgresStatement("SELECT pg_advisory_xact_lock($1)", [Self.lockKey]),
                PostgresStatement("""
                    CREATE TABLE IF NOT EXISTS schema_migrations (
                        version bigint PRIMARY KEY,
                        name text NOT NULL,
                        applied_at timestamptz NOT NULL DEFAULT now()
                    )
                    """),
            ])
        } catch let error as PostgresError {
            throw MigrationError("cannot create schema_migrations: \(error)", underlying: error)
        }
    }

    /// Runs one migration unless another migrator got there first; true when this call applied it.
    private func apply(_ migration: Migration) async throws -> Bool {
        let started = ContinuousClock.now
        let label = migration.file
        do {
            let applied = try await pool.transaction { connection -> Bool in
                // Waiting for another migrator's lock, or a long migration, is silence from a server that is fine.
                connection.answerTimeoutMs = nil
                let check = try await connection.pipeline([
                    // Migrations may legitimately outlast the service's statement timeout.
                    PostgresStatement("SET LOCAL statement_timeout = 0"),
                    PostgresStatement("SELECT pg_advisory_xact_lock($1)", [Self.lockKey]),
                    PostgresStatement("SELECT EXISTS (SELECT 1 FROM schema_migrations WHERE version = $1) AS applied", [migration.version]),
                ])
                if try check[2].rows.first?.bool("applied") ?? false { return false }
                _ = try await connection.simpleQuery(migration.sql)
                guard connection.transactionStatus == .inTransaction else {
                    throw MigrationError("migration \(label) ended the transaction itself; remove its BEGIN/COMMIT/ROLLBACK")
                }
                _ = try await connection.query(
                    "INSERT INTO schema_migrations (version, name) VALUES ($1, $2)", migration.version, migration.name)
                return true
            }
            if applied {
                let elapsed = ContinuousClock.now - started
                Log.info("migration_applied", ["version": migration.version, "name": migration.name,
                                               "ms": elapsed.components.seconds * 1000 + elapsed.components.attoseconds / 1_000_000_000_000_000])
            }
            return applied
        } catch let error as PostgresError {
            throw MigrationError("migration \(label) failed: \(error)", underlying: error)
        }
    }
}
