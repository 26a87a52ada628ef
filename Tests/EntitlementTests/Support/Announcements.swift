import Foundation
@testable import EntitlementService
@testable import ServiceRuntime

extension TestDatabase {
    /// Runs `body` against a fresh database with every migration applied (its conninfo and a pool on it).
    @Loop static func withMigratedDatabase<T>(_ body: @Loop (String, PostgresPool) async throws -> T) async throws -> T {
        try await withTemporaryDatabase { url in
            let pool = PostgresPool(conninfo: url, size: 4)
            do {
                _ = try await Migrator(pool: pool, directory: Migrator.defaultDirectory()).run()
                let value = try await body(url, pool)
                await pool.close()
                return value
            } catch {
                await pool.close()
                throw error
            }
        }
    }
}

/// What the change triggers announce, heard on a connection of its own.
///
/// `collected()` proves absence as well as presence without waiting on time: it sends a sentinel on another
/// channel and returns what was announced before the sentinel arrived. Notifications are delivered in commit
/// order, whatever their channel, so everything committed before the sentinel has been heard by then.
@Loop
final class Announcements {
    private static let sentinelChannel = "test_sentinel"
    private let listening: PostgresConnection
    private let sender: PostgresConnection
    private let inbox = Inbox<PostgresNotification>()

    private init(listening: PostgresConnection, sender: PostgresConnection) {
        self.listening = listening
        self.sender = sender
    }

    /// Listens on `EntitlementCache.changesChannel` of the database at `url`.
    static func listen(_ url: String) async throws -> Announcements {
        let listening = try await PostgresConnection.connect(url, timeoutMs: 5_000)
        let sender = try await PostgresConnection.connect(url, timeoutMs: 5_000)
        let announcements = Announcements(listening: listening, sender: sender)
        listening.onNotification = { [inbox = announcements.inbox] in inbox.record($0) }
        _ = try await listening.simpleQuery("LISTEN \(EntitlementCache.changesChannel); LISTEN \(sentinelChannel)")
        return announcements
    }

    /// The payloads announced on `EntitlementCache.changesChannel` since the previous call, in order.
    func collected() async throws -> [String] {
        let token = randomToken()
        _ = try await sender.query("SELECT pg_notify($1, $2)", Self.sentinelChannel, token)
        let heard = try await inbox.take("the sentinel") { $0.channel == Self.sentinelChannel && $0.payload == token }
        return heard.filter { $0.channel == EntitlementCache.changesChannel }.map(\.payload)
    }

    func close() {
        listening.close()
        sender.close()
    }
}
