import Foundation
@testable import AppStore
@testable import EntitlementService
@testable import FakeAppStore
@testable import ServiceRuntime

/// A failure of the test set-up itself, with a message saying what is missing.
struct TestSetupError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// The PostgreSQL server `scripts/test.sh` starts for the tests.
///
/// Tests that need a database call `TestDatabase.url()`, which fails the test with an explanation when
/// `TEST_DATABASE_URL` is unset: database tests never skip silently.
enum TestDatabase {
    /// `TEST_DATABASE_URL`, a libpq URI or conninfo.
    static func url() throws -> String {
        try environment("TEST_DATABASE_URL")
    }

    /// The same server and credentials with another database name.
    static func url(database: String) throws -> String {
        let base = try url()
        guard base.hasPrefix("postgres://") || base.hasPrefix("postgresql://") else {
            return base + " dbname=\(database)"  // in a conninfo string the last keyword wins
        }
        guard var components = URLComponents(string: base) else {
            throw TestSetupError("TEST_DATABASE_URL is not a valid URI")
        }
        components.path = "/" + database
        return components.string ?? base
    }

    /// Runs `body` against a fresh, empty database (its conninfo passed in), dropped afterwards. Tests that
    /// create `schema_migrations` or many tables use one so they neither see nor disturb other tests.
    @Loop static func withTemporaryDatabase<T>(_ body: @Loop (String) async throws -> T) async throws -> T {
        let name = "test_" + randomToken()
        let admin = try await PostgresConnection.connect(try url())
        defer { admin.close() }
        _ = try await admin.query("CREATE DATABASE \(name)")
        do {
            let value = try await body(try url(database: name))
            _ = try await admin.query("DROP DATABASE \(name) WITH (FORCE)")
            return value
        } catch {
            _ = try? await admin.query("DROP DATABASE \(name) WITH (FORCE)")
            throw error
        }
    }

    /// A table name no other test uses.
    static func uniqueTableName(_ prefix: String) -> String {
        prefix + "_" + String(randomToken().prefix(12))
    }

    static func environment(_ name: String) throws -> String {
        guard let value = ProcessInfo.processInfo.environment[name], !value.isEmpty else {
            throw TestSetupError("\(name) is not set: run the database tests with scripts/test.sh, which starts a throwaway PostgreSQL and exports it")
        }
        return value
    }

    /// A TCP port on 127.0.0.1 that nothing listens on at the moment of the call.
    static func freePort() throws -> Int {
        let listener = try Listener()
        defer { listener.close() }
        return listener.port
    }
}

/// A listening TCP socket on 127.0.0.1 that never accepts: connections complete at the kernel and then hear
/// nothing, like a server that hangs.
final class Listener: @unchecked Sendable {
    private let socket: Int32
    let port: Int

    init() throws {
        let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard socket >= 0 else { throw TestSetupError("socket() failed: errno \(errno)") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { generic in
                bind(socket, generic, length) == 0 && listen(socket, 8) == 0 && getsockname(socket, generic, &length) == 0
            }
        }
        guard bound else {
            Glibc.close(socket)
            throw TestSetupError("could not listen on 127.0.0.1: errno \(errno)")
        }
        self.socket = socket
        port = Int(UInt16(bigEndian: address.sin_port))
    }

    func close() { Glibc.close(socket) }
}

/// A PostgreSQL cluster of its own for a test that must restart the server, so that restarting it cannot
/// disturb tests running at the same time against the shared `TEST_DATABASE_URL` server. Built with the
/// binaries in `TEST_PG_BIN` (exported by `scripts/test.sh`); run as `postgres` when the tests run as root.
final class PrivateServer: Sendable {
    let directory: String
    let port: Int
    private let bin: String

    /// The cluster's conninfo (trust authentication, database `postgres`).
    var url: String { "postgresql://postgres@127.0.0.1:\(port)/postgres" }

    private init(bin: String, directory: String, port: Int) {
        self.bin = bin
        self.directory = directory
        self.port = port
    }

    /// Initialises and starts a cluster in a temporary directory.
    static func start() async throws -> PrivateServer {
        let server = PrivateServer(
            bin: try TestDatabase.environment("TEST_PG_BIN"),
            directory: NSTemporaryDirectory() + "entitlement-private-pg-" + UUID().uuidString,
            port: try TestDatabase.freePort())
        try FileManager.default.createDirectory(atPath: server.directory, withIntermediateDirectories: true)
        if getuid() == 0 {
            try await run("/bin/chown", ["postgres:postgres", server.directory])
        }
        try await server.asOwner("initdb", ["-D", server.directory, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--locale=C.UTF-8", "-N"])
        try await server.asOwner("pg_ctl", [
            "-D", server.directory, "-l", "\(server.directory)/server.log", "-w", "-t", "60",
            "-o", "-p \(server.port) -k \(server.directory) -c listen_addresses=127.0.0.1 -c fsync=off", "start",
        ])
        return server
    }

    /// `pg_ctl restart -m fast -w`: every connection is cut, and the server accepts again when it returns.
    func restart() async throws {
        try await asOwner("pg_ctl", ["-D", directory, "-l", "\(directory)/server.log", "-m", "fast", "-w", "-t", "60", "restart"])
    }

    /// Stops the cluster and deletes its directory.
    func stop() async {
        try? await asOwner("pg_ctl", ["-D", directory, "-m", "immediate", "-w", "stop"])
        try? FileManager.default.removeItem(atPath: directory)
    }

    private func asOwner(_ program: String, _ arguments: [String]) async throws {
        if getuid() == 0 {
            try await Self.run("/usr/sbin/runuser", ["-u", "postgres", "--", "\(bin)/\(program)"] + arguments)
        } else {
            try await Self.run("\(bin)/\(program)", arguments)
        }
    }

    /// Runs a command to completion on a thread of its own, so that waiting blocks neither the uv loop nor
    /// Swift's cooperative threads. Uses posix_spawn and waitpid: Foundation's `Process` may never see the
    /// exit of `pg_ctl start`, whose server keeps running in the background.
    private static func run(_ executable: String, _ arguments: [String]) async throws {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, Error>) in
            Thread.detachNewThread {
                continuation.resume(with: Result { try spawnAndWait(executable, arguments) })
            }
        }
    }

    private static func spawnAndWait(_ executable: String, _ arguments: [String]) throws {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        defer {
            for argument in argv { free(argument) }
            posix_spawn_file_actions_destroy(&actions)
        }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, executable, &actions, nil, argv, environ)
        guard spawned == 0 else { throw TestSetupError("cannot start \(executable): error \(spawned)") }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
        let exitCode = (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
        guard exitCode == 0 else {
            throw TestSetupError("\(executable) \(arguments.joined(separator: " ")) exited with \(exitCode)")
        }
    }
}

/// 32 random lowercase hex digits (a UUID without its dashes): unique names for databases, keys and secrets.
func randomToken() -> String {
    UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased()
}
