import FakeAppStore
import ServiceRuntime
import Foundation

/// Carries out a parsed command; returns the process exit status.
@Loop
enum Commands {
    static func run(_ command: Command) async -> Int32 {
        do {
            switch command {
            case .help:
                print(Command.usage)
                return 0
            case .migrate:
                let configuration = try loadConfiguration()
                let pool = PostgresPool(conninfo: configuration.databaseURL!, size: 1)
                let applied = try await Migrator(pool: pool, directory: migrationsDirectory(configuration)).run()
                Log.info("migrations_applied", ["count": applied.count, "versions": applied.map(String.init).joined(separator: ",")])
                await pool.close()
                return 0
            case .serve:
                let configuration = try loadConfiguration()
                // Before any socket, and inherited by the worker copies.
                let openFiles = OpenFileLimit.raiseToHardLimit()
                let environment = ProcessInfo.processInfo.environment
                let copies = try WorkerProcesses.count(environment: environment)
                // Bound before anything else, so a port in use stops start-up before the database is touched.
                let inherited = try WorkerProcesses.inheritedSocket(environment: environment)
                let socket = try inherited ?? ListeningSocket.bind(host: configuration.listenAddress, port: configuration.port)
                if inherited == nil { configuration.logWarnings(openFileLimit: openFiles) }
                let writes = try WorkerProcesses.sharedWrites(environment: environment, count: copies)
                let application = try await Application(configuration: configuration, migrationsDirectory: migrationsDirectory(configuration),
                                                        writes: writes, isCopy: inherited != nil)
                _ = try application.start(socket: socket)
                let copiesWatch = try WorkerSupervisor(count: copies, socket: socket, writes: writes)
                await application.runUntilSignalled { copiesWatch.signal($0) }
                await copiesWatch.waitForExit()
                return 0
            case .fakeAppStore(let port, let host, let rootCertificateOut):
                return await FakeAppStore.runCommand(host: host, port: port, rootCertificateOut: rootCertificateOut)
            }
        } catch let error as ConfigurationError {
            FileHandle.standardError.write(Data("entitlement-service: \(error.description)\n".utf8))
            return 78
        } catch let error as HTTPServerError {
            Log.error("startup_failed", ["error": error.description])
            return 1
        } catch {
            // One line, as for the other failures; the database named by DATABASE_URL when it could not be reached
            // (libpq's message names no password).
            if let unreachable = Self.unreachableDatabase(error) {
                Log.error("startup_failed", ["variable": "DATABASE_URL", "error": unreachable.message])
            } else {
                Log.error("startup_failed", ["error": String(describing: error)])
            }
            return 1
        }
    }

    /// The connection failure behind a start-up error (the first migration step included), if that is what it is.
    private static func unreachableDatabase(_ error: any Error) -> PostgresError? {
        let failure = (error as? PostgresError) ?? (error as? MigrationError)?.underlying
        guard let failure, failure.kind == .connection || failure.kind == .timeout else { return nil }
        return failure
    }

    private static func loadConfiguration() throws(ConfigurationError) -> Configuration {
        let configuration = try Configuration(environment: ProcessInfo.processInfo.environment)
        try configuration.validateForServing()
        return configuration
    }

    /// `MIGRATIONS_DIR`, else the migrator's default (`migrations` here, else the checkout's).
    static func migrationsDirectory(_ configuration: Configuration) -> URL {
        configuration.migrationsDirectory.map { URL(fileURLWithPath: $0) } ?? Migrator.defaultDirectory()
    }
}
