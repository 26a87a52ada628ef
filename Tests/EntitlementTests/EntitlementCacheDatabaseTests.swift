import Foundation
import Testing
@testable import EntitlementService
@testable import ServiceRuntime

/// `EntitlementCache` wired to a real `PostgresListener` on a migrated database: what an instance of the
/// service will run, without the HTTP routes.
@Suite struct EntitlementCacheDatabaseTests {
    /// One service instance's cache and listener, with the listener's states and notifications recorded.
    @Loop final class Instance {
        let cache: EntitlementCache
        let listener: PostgresListener
        let states: Inbox<Bool>
        let notifications: Inbox<PostgresNotification>

        init(url: String, pool: PostgresPool) {
            let cache = EntitlementCache(capacity: 1_000, db: pool)
            let states = Inbox<Bool>(), notifications = Inbox<PostgresNotification>()
            self.cache = cache
            self.states = states
            self.notifications = notifications
            listener = PostgresListener(
                EntitlementCache.listenerSettings(conninfo: url),
                onNotification: { notification in
                    cache.received(notification)
                    notifications.record(notification)
                },
                onStateChange: { listening in
                    cache.listenerChanged(listening: listening)
                    states.record(listening)
                })
        }

        /// Starts listening and waits until it does.
        func start() async throws {
            listener.start()
            _ = try await states.take("listening") { $0 }
        }

        /// Fills `userID` as the read route will, with a placeholder answer.
        func fill(_ userID: String) {
            #expect(cache.store(EntitlementCacheTests.answer(1), validUntil: nil, for: cache.ticket(for: userID)))
        }

        func cached(_ userID: String) -> Bool {
            cache.lookup(userID, now: Date()) != nil
        }
    }

    static func grant(_ userID: String, on pool: PostgresPool) async throws {
        _ = try await pool.query("INSERT INTO grants (user_id, entitlement, reason, created_by) VALUES ($1, 'premium', 'test', 'test')", userID)
    }

    /// The own-instance promise: once the writing request's barrier has returned, the next read misses.
    @Test @Loop func afterTheBarrierTheWritersOwnChangeIsVisible() async throws {
        try await TestDatabase.withMigratedDatabase { url, pool in
            let instance = Instance(url: url, pool: pool)
            try await instance.start()
            let bystander = "bystander-" + randomToken()
            instance.fill(bystander)
            let clears = instance.cache.clears
            for round in 0..<40 {
                let userID = "u\(round)-" + randomToken()
                instance.fill(userID)
                if round.isMultiple(of: 2) {
                    try await Self.grant(userID, on: pool)
                } else {
                    _ = try await pool.query("""
                        INSERT INTO consumable_balances (user_id, currency, balance) VALUES ($1, 'coins', 1)
                        ON CONFLICT (user_id, currency) DO UPDATE SET balance = consumable_balances.balance + 1
                        """, userID)
                }
                await instance.cache.barrier()
                #expect(!instance.cached(userID), "round \(round): the change was not visible after the barrier")
            }
            #expect(instance.cache.clears == clears, "every token came back: the barrier never had to clear")
            #expect(instance.cached(bystander))
            await instance.listener.stop()
        }
    }

    /// The other-instance promise: a change reaches every listening instance, well within a second.
    @Test @Loop func anotherInstanceHearsOfTheChangeWithinASecond() async throws {
        try await TestDatabase.withMigratedDatabase { url, pool in
            let writer = Instance(url: url, pool: pool)
            let reader = Instance(url: url, pool: pool)
            try await writer.start()
            try await reader.start()
            let userID = "u-" + randomToken()
            reader.fill(userID)
            try await Self.grant(userID, on: pool)
            await writer.cache.barrier()
            _ = try await reader.notifications.take(timeoutMs: 1_000, "the change on the other instance") { $0.payload == userID }
            #expect(!reader.cached(userID))
            await writer.listener.stop()
            await reader.listener.stop()
        }
    }

    /// A listening connection that stalls without closing (its server process stopped: notifications held back,
    /// nothing reported) stops the cache within its answer window, well inside the 1 s in which every instance
    /// must see a change; once the connection answers again the cache serves again, from empty.
    @Test @Loop func aStalledListenerStopsTheCacheWithinASecond() async throws {
        try await TestDatabase.withMigratedDatabase { url, pool in
            let instance = Instance(url: url, pool: pool)
            try await instance.start()
            instance.fill("a")
            #expect(instance.cached("a"))
            let backend = pid_t(try #require(instance.listener.backendPID))
            try #require(kill(backend, SIGSTOP) == 0, "the test stops the listener's server process (errno \(errno))")
            let stopped = ContinuousClock.now
            var failure: (any Error)?
            do { _ = try await instance.states.take(timeoutMs: 5_000, "not listening") { !$0 } } catch { failure = error }
            let waited = stopped.duration(to: .now)
            kill(backend, SIGCONT)
            if let failure { throw failure }
            #expect(waited < .milliseconds(1_000), "stopped serving after \(waited)")
            #expect(!instance.cached("a") && !instance.cache.isServing)
            _ = try await instance.states.take("listening again") { $0 }
            instance.fill("a")
            #expect(instance.cached("a"))
            await instance.listener.stop()
        }
    }

    /// The catalog's cached copy is not served while a `WORKERS` copy's write may not have been heard yet: a
    /// product changed through one copy reads at once on the others.
    @Test @Loop func aCachedCatalogIsNotServedWhileACopysWriteIsUnheard() async throws {
        try await TestDatabase.withMigratedDatabase { url, pool in
            // Wired as the service wires a copy: the catalog asks the entitlement cache, which reads the shared count.
            let writes = SharedCounter()
            let cache = EntitlementCache(capacity: 10, db: pool, writes: writes)
            cache.listenerChanged(listening: true)
            let catalog = CatalogCache(db: pool)
            catalog.hasUnheardWrites = { !cache.hasHeardEveryWrite(now: Date()) }
            #expect(try await catalog.current().product("late") == nil)
            _ = try await pool.query("INSERT INTO products (product_id, type, entitlements) VALUES ('late', 'non_consumable', '{pro}')")
            #expect(try await catalog.current().product("late") == nil, "within its age the cached copy serves")
            writes.increment()  // another copy answered its write; its token is not heard here yet
            #expect(try await catalog.current().product("late") != nil)
        }
    }

    /// A catalog change empties every cache; so does the listener's loss, and it serves again once back.
    @Test @Loop func catalogChangesAndReconnectsEmptyTheCache() async throws {
        try await TestDatabase.withMigratedDatabase { url, pool in
            let instance = Instance(url: url, pool: pool)
            try await instance.start()
            instance.fill("a")
            _ = try await pool.query("INSERT INTO products (product_id, type) VALUES ('p', 'non_consumable')")
            await instance.cache.barrier()
            #expect(!instance.cached("a") && instance.cache.count == 0)

            instance.fill("a")
            let admin = try await PostgresConnection.connect(url, timeoutMs: 5_000)
            defer { admin.close() }
            _ = try await admin.query("SELECT pg_terminate_backend($1::int)", Int(try #require(instance.listener.backendPID)))
            _ = try await instance.states.take("not listening") { !$0 }
            #expect(!instance.cache.isServing && instance.cache.count == 0)
            _ = try await instance.states.take("listening again") { $0 }
            instance.fill("a")
            #expect(instance.cached("a"))
            await instance.listener.stop()
            #expect(!instance.cache.isServing)
        }
    }
}
