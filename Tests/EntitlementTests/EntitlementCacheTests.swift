import Foundation
import Testing
@testable import EntitlementService
@testable import ServiceRuntime
import Timestamps

/// `EntitlementCache` as plain Swift on the loop: the listener's reports and the readers' calls are made by
/// hand, in exactly the interleavings under test.
@Suite struct EntitlementCacheTests {
    /// The pool as the barrier sees it: records each token sent, then does what the test says.
    @Loop final class SyncDatabase: PostgresQueryable {
        private(set) var tokens: [String] = []
        var failure: PostgresError?
        var onSend: @Loop (String) -> Void = { _ in }

        func query(_ sql: String, _ parameters: [any PostgresEncodable]) async throws -> PostgresResult {
            if let failure { throw failure }
            #expect(parameters.first?.postgresText() == EntitlementCache.syncChannel)
            let token = try #require(parameters.last?.postgresText())
            tokens.append(token)
            onSend(token)
            return .empty(command: "SELECT 1", affectedRows: 1)
        }
    }

    static let now = Date(timeIntervalSince1970: 1_795_310_400)

    @Loop static func listeningCache(capacity: Int = 10, db: SyncDatabase = SyncDatabase(), barrierTimeoutMs: UInt64 = 10_000,
                                     onClear: @escaping @Loop () -> Void = {}) -> EntitlementCache {
        let cache = EntitlementCache(capacity: capacity, db: db, barrierTimeoutMs: barrierTimeoutMs, onClear: onClear)
        cache.listenerChanged(listening: true)
        return cache
    }

    /// A body shaped as the read route's answers (`{"as_of":…,"n":n}`), as of `at`.
    static func body(_ n: Int, at: Date = now) -> [UInt8] {
        Array(#"{"as_of":"\#(RFC3339.string(from: at))","n":\#(n)}"#.utf8)
    }

    /// Answer `n`, as of `now`.
    static func answer(_ n: Int) -> EntitlementsAnswer { EntitlementsAnswer(body: body(n), asOf: now)! }

    /// Fills `userID` as the read route does with answer `n`; true when the answer was kept.
    @Loop @discardableResult static func fill(_ cache: EntitlementCache, _ userID: String, _ n: Int = 1, validUntil: Date? = nil) -> Bool {
        cache.store(answer(n), validUntil: validUntil, for: cache.ticket(for: userID))
    }

    @Loop static func changed(_ userID: String) -> PostgresNotification {
        PostgresNotification(channel: EntitlementCache.changesChannel, payload: userID, senderPID: 1)
    }

    // MARK: - Serving

    /// Past the end of the listener's answer window on the loop's clock, the cache serves nothing, even before the
    /// listener's timer reports it stopped listening (a process paused past the window answers first).
    @Test @Loop func servesNothingPastTheListenersAnswerWindow() {
        let cache = Self.listeningCache()
        #expect(Self.fill(cache, "u", 3))
        cache.listenerWindow(endsAt: EventLoop.shared.now + 60_000)
        #expect(cache.lookup("u", now: Self.now) == Self.body(3))
        cache.listenerWindow(endsAt: EventLoop.shared.now)
        #expect(!cache.isServing && cache.lookup("u", now: Self.now) == nil)
    }

    @Test @Loop func servesAndKeepsNothingUntilTheListenerListens() {
        let cache = EntitlementCache(capacity: 10, db: SyncDatabase())
        #expect(!Self.fill(cache, "u"))
        #expect(cache.lookup("u", now: Self.now) == nil && !cache.isServing)
        cache.listenerChanged(listening: true)
        #expect(Self.fill(cache, "u", 7))
        #expect(cache.lookup("u", now: Self.now) == Self.body(7))
        #expect(cache.hits == 1 && cache.misses == 1)
    }

    @Test @Loop func anAnswerIsServedUntilItsValidUntil() {
        let cache = Self.listeningCache()
        let end = Self.now.addingTimeInterval(60)
        Self.fill(cache, "expiring", 1, validUntil: end)
        Self.fill(cache, "lasting", 2, validUntil: nil)
        #expect(cache.lookup("expiring", now: end.addingTimeInterval(-0.001)) == Self.body(1, at: end.addingTimeInterval(-0.001)))
        #expect(cache.lookup("expiring", now: end) == nil, "at validUntil the answer may differ")
        #expect(cache.count == 1, "the expired answer was dropped")
        #expect(cache.lookup("lasting", now: Self.now.addingTimeInterval(86_400 * 365)) == Self.body(2, at: Self.now.addingTimeInterval(86_400 * 365)))
    }

    @Test @Loop func aChangedUserIsDroppedAndOthersStay() {
        let cache = Self.listeningCache()
        Self.fill(cache, "u", 1)
        Self.fill(cache, "v", 2)
        cache.received(Self.changed("u"))
        #expect(cache.lookup("u", now: Self.now) == nil)
        #expect(cache.lookup("v", now: Self.now) == Self.body(2))
        #expect(cache.invalidations == 1)
    }

    @Test @Loop func everyoneAndTheListenersLossAndReturnEmptyTheCache() {
        let cleared = Inbox<Void>()
        let cache = Self.listeningCache { cleared.record(()) }
        #expect(cleared.items.count == 1, "listening began with an empty cache")
        Self.fill(cache, "u")
        // A user named "*" is a user: only that one is dropped.
        Self.fill(cache, "*")
        cache.received(PostgresNotification(channel: EntitlementCache.changesChannel, payload: "*", senderPID: 1))
        #expect(cache.lookup("*", now: Self.now) == nil && cache.lookup("u", now: Self.now) != nil && cleared.items.count == 1)
        cache.received(PostgresNotification(channel: EntitlementCache.changesChannel, payload: "", senderPID: 1))
        #expect(cache.count == 0 && cleared.items.count == 2)

        Self.fill(cache, "u")
        cache.listenerChanged(listening: false)
        #expect(cache.count == 0 && cleared.items.count == 3 && !cache.isServing)
        cache.listenerChanged(listening: true)
        #expect(cleared.items.count == 4, "notifications may have been missed while the listener was away")
        #expect(cache.lookup("u", now: Self.now) == nil)
        #expect(cache.clears == 4)
    }

    @Test @Loop func otherChannelsAndForeignTokensChangeNothing() {
        let cache = Self.listeningCache()
        Self.fill(cache, "u")
        cache.received(PostgresNotification(channel: "something_else", payload: "u", senderPID: 1))
        cache.received(PostgresNotification(channel: EntitlementCache.syncChannel, payload: "another-instance.1", senderPID: 1))
        #expect(cache.lookup("u", now: Self.now) == Self.body(1))
    }

    @Test @Loop func sizeZeroDisablesTheCache() async {
        let db = SyncDatabase()
        let cache = EntitlementCache(capacity: 0, db: db)
        cache.listenerChanged(listening: true)
        #expect(!cache.isServing && !Self.fill(cache, "u"))
        #expect(cache.lookup("u", now: Self.now) == nil && cache.count == 0)
        await cache.barrier()
        #expect(db.tokens.isEmpty, "a disabled cache has nothing to wait for")
    }

    @Test @Loop func aFullCacheEvictsTheEntryNotReadSinceItCameIn() {
        let cache = Self.listeningCache(capacity: 2)
        Self.fill(cache, "a", 1)
        Self.fill(cache, "b", 2)
        _ = cache.lookup("a", now: Self.now)
        Self.fill(cache, "c", 3)
        #expect(cache.count == 2 && cache.evictions == 1)
        #expect(cache.lookup("b", now: Self.now) == nil)
        #expect(cache.lookup("a", now: Self.now) == Self.body(1) && cache.lookup("c", now: Self.now) == Self.body(3))
    }

    // MARK: - Tickets

    @Test @Loop func anAnswerReadBeforeItsUsersChangeIsNotKept() {
        let cache = Self.listeningCache()
        let ticket = cache.ticket(for: "u")
        cache.received(Self.changed("u"))  // the change commits while the reader reads the old data
        #expect(!cache.store(Self.answer(1), validUntil: nil, for: ticket))
        #expect(cache.lookup("u", now: Self.now) == nil)
    }

    @Test @Loop func anotherUsersChangeDoesNotSpoilATicket() {
        let cache = Self.listeningCache()
        let ticket = cache.ticket(for: "u")
        cache.received(Self.changed("v"))
        #expect(cache.store(Self.answer(1), validUntil: nil, for: ticket))
        #expect(cache.lookup("u", now: Self.now) == Self.body(1))
    }

    @Test @Loop func aChangeHeardBeforeTheTicketDoesNotSpoilIt() {
        let cache = Self.listeningCache()
        cache.received(Self.changed("u"))
        #expect(Self.fill(cache, "u"))
    }

    @Test @Loop func clearingSpoilsEveryEarlierTicket() {
        let cache = Self.listeningCache()
        let beforeEveryone = cache.ticket(for: "u")
        cache.received(PostgresNotification(channel: EntitlementCache.changesChannel, payload: EntitlementCache.everyone, senderPID: 1))
        #expect(!cache.store(Self.answer(1), validUntil: nil, for: beforeEveryone))

        let beforeLoss = cache.ticket(for: "u")
        cache.listenerChanged(listening: false)
        cache.listenerChanged(listening: true)
        #expect(!cache.store(Self.answer(1), validUntil: nil, for: beforeLoss), "changes during the outage went unheard")

        cache.listenerChanged(listening: false)
        let whileAway = cache.ticket(for: "u")
        cache.listenerChanged(listening: true)
        #expect(!cache.store(Self.answer(1), validUntil: nil, for: whileAway))
        #expect(Self.fill(cache, "u"), "a ticket taken while listening again is good")
    }

    /// Two readers of one user overlap a change: the one that read before it loses, the one after wins,
    /// whichever stores last.
    @Test @Loop func ofTwoOverlappingReadersOnlyTheOneAfterTheChangeIsKept() {
        let cache = Self.listeningCache()
        let early = cache.ticket(for: "u")
        cache.received(Self.changed("u"))
        let late = cache.ticket(for: "u")
        #expect(cache.store(Self.answer(2), validUntil: nil, for: late))
        #expect(!cache.store(Self.answer(1), validUntil: nil, for: early))
        #expect(cache.lookup("u", now: Self.now) == Self.body(2))
    }

    // MARK: - Barrier

    @Test @Loop func aBarrierReturnsWhenItsTokenComesBack() async {
        let db = SyncDatabase()
        let cache = Self.listeningCache(db: db)
        db.onSend = { token in
            Task { @Loop in
                cache.received(Self.changed("u"))  // committed before the token: delivered first
                cache.received(PostgresNotification(channel: EntitlementCache.syncChannel, payload: token, senderPID: 1))
            }
        }
        Self.fill(cache, "u")
        Self.fill(cache, "v")
        let clears = cache.clears
        await cache.barrier()
        #expect(db.tokens.count == 1)
        #expect(cache.lookup("u", now: Self.now) == nil, "the change announced before the token was handled")
        #expect(cache.lookup("v", now: Self.now) == Self.body(1))
        #expect(cache.clears == clears && cache.syncs.count == 0)
    }

    @Test @Loop func aTokenHeardBeforeItsQueryAnswersCounts() async {
        let db = SyncDatabase()
        let cache = Self.listeningCache(db: db)
        db.onSend = { token in cache.received(PostgresNotification(channel: EntitlementCache.syncChannel, payload: token, senderPID: 1)) }
        Self.fill(cache, "v")
        await cache.barrier()
        await cache.barrier()
        #expect(Set(db.tokens).count == 2, "every barrier sends a token of its own")
        #expect(cache.lookup("v", now: Self.now) == Self.body(1) && cache.syncs.count == 0)
    }

    @Test @Loop func aTokenThatNeverComesBackClearsTheCache() async {
        let cache = Self.listeningCache(barrierTimeoutMs: 20)
        Self.fill(cache, "v")
        await cache.barrier()
        #expect(cache.count == 0 && cache.isServing && cache.syncs.count == 0)
    }

    @Test @Loop func aTokenThatCannotBeSentClearsTheCache() async {
        let db = SyncDatabase()
        db.failure = PostgresError(kind: .connection, message: "no database")
        let cache = Self.listeningCache(db: db)
        Self.fill(cache, "v")
        await cache.barrier()
        #expect(cache.count == 0 && cache.syncs.count == 0)
    }

    @Test @Loop func aBarrierWaitingWhenTheListenerIsLostReturnsAtOnce() async {
        let db = SyncDatabase()
        let cache = Self.listeningCache(db: db, barrierTimeoutMs: 600_000)
        db.onSend = { _ in Task { @Loop in cache.listenerChanged(listening: false) } }
        Self.fill(cache, "v")
        await cache.barrier()
        #expect(cache.count == 0 && !cache.isServing)
        await cache.barrier()
        #expect(db.tokens.count == 1, "a cache that is not serving sends nothing")
    }

    // MARK: - Copies sharing an address (`WORKERS`)

    /// The sync notification of `token`, as every copy's listener hears it.
    @Loop static func sync(_ token: String) -> PostgresNotification {
        PostgresNotification(channel: EntitlementCache.syncChannel, payload: token, senderPID: 1)
    }

    /// A write answered by one copy keeps the other from serving until that copy has heard the write's token,
    /// so the client's next read, whichever copy takes it, sees the change.
    @Test @Loop func aCopyServesNothingUntilItHearsTheTokenOfAWriteAnswered() async {
        let writes = SharedCounter()
        let writerDB = SyncDatabase(), readerDB = SyncDatabase()
        let writer = EntitlementCache(capacity: 10, db: writerDB, writes: writes)
        let reader = EntitlementCache(capacity: 10, db: readerDB, writes: writes)
        writer.listenerChanged(listening: true)
        reader.listenerChanged(listening: true)
        Self.fill(reader, "u")
        Self.fill(reader, "v")
        var heldToken: String?
        writerDB.onSend = { token in
            heldToken = token
            Task { @Loop in
                writer.received(Self.changed("u"))
                writer.received(Self.sync(token))
            }
        }
        await writer.barrier()
        #expect(writes.value == 1)
        // The reader's listener has heard neither the change nor the token yet: nothing is served, not even "v".
        #expect(reader.lookup("u", now: Self.now) == nil && reader.lookup("v", now: Self.now) == nil)
        reader.received(Self.changed("u"))
        reader.received(Self.sync(heldToken ?? ""))
        #expect(reader.lookup("u", now: Self.now) == nil)
        #expect(reader.lookup("v", now: Self.now) == Self.body(1))
        #expect(readerDB.tokens.isEmpty, "the writer's token sufficed")

        // Another group's token (another address, its own counter) with a higher count changes nothing here.
        await writer.barrier()
        let stranger = EntitlementCache(capacity: 10, db: SyncDatabase(), writes: SharedCounter()).nextToken(count: 99)
        reader.received(Self.sync(stranger))
        #expect(reader.lookup("v", now: Self.now) == nil)
    }

    /// When the token of a counted write never comes (its writer died first), a read that has found the cache
    /// behind for longer than `catchUpAfter` starts a barrier of the copy's own, after which it serves again.
    @Test @Loop func aCopyLeftBehindCatchesUpByItself() async throws {
        let writes = SharedCounter()
        let db = SyncDatabase()
        let reader = EntitlementCache(capacity: 10, db: db, writes: writes)
        reader.listenerChanged(listening: true)
        db.onSend = { token in Task { @Loop in reader.received(Self.sync(token)) } }
        Self.fill(reader, "v")
        writes.increment()  // a copy counted a write and died before sending its token
        #expect(reader.lookup("v", now: Self.now) == nil)
        #expect(reader.lookup("v", now: Self.now.addingTimeInterval(EntitlementCache.catchUpAfter / 2)) == nil)
        #expect(db.tokens.isEmpty, "not before catchUpAfter")
        #expect(reader.lookup("v", now: Self.now.addingTimeInterval(EntitlementCache.catchUpAfter * 2)) == nil)
        _ = await eventually(timeout: 5) { reader.lookup("v", now: Self.now) != nil }
        #expect(db.tokens.count == 1)
        #expect(reader.lookup("v", now: Self.now) == Self.body(1))
    }

    /// A cache that is not serving (its listener down) still sends the count of its writes to its copies.
    @Test @Loop func aWriteOnACopyThatIsNotServingStillReachesTheOthers() async {
        let writes = SharedCounter()
        let db = SyncDatabase()
        let silent = EntitlementCache(capacity: 10, db: db, writes: writes)
        await silent.barrier()
        #expect(writes.value == 1 && db.tokens.count == 1 && silent.syncs.count == 0)
        #expect(db.tokens[0].hasSuffix("/1"))
    }

    /// The counter in memory shared through a descriptor: a second mapping (as a copy makes) sees the same id
    /// and every increment.
    @Test func aSharedCounterIsOneCounterInEveryMapping() throws {
        let first = try SharedCounter.shared()
        let descriptor = try #require(first.descriptor)
        let second = try SharedCounter(inheriting: descriptor)
        #expect(first.id == second.id && first.id != 0)
        #expect(first.increment() == 1 && second.increment() == 2 && first.value == 2)
        #expect(throws: SharedCounterError.self) { try SharedCounter(inheriting: 0) }
    }

    // MARK: - Configuration and metrics

    @Test func theSizeComesFromTheEnvironment() throws {
        #expect(try Configuration(environment: [:]).entitlementCacheSize == 100_000)
        #expect(try Configuration(environment: ["ENTITLEMENT_CACHE_SIZE": "0"]).entitlementCacheSize == 0)
        #expect(try Configuration(environment: ["ENTITLEMENT_CACHE_SIZE": "250"]).entitlementCacheSize == 250)
        for bad in ["-1", "many", "10000001"] {
            #expect { _ = try Configuration(environment: ["ENTITLEMENT_CACHE_SIZE": bad]) } throws: { error in
                (error as? ConfigurationError)?.variable == "ENTITLEMENT_CACHE_SIZE"
            }
        }
    }

    @Test @Loop func metricsCountHitsMissesEvictionsInvalidationsAndSize() {
        let metrics = Metrics()
        let cache = Self.listeningCache(capacity: 1)
        cache.registerMetrics(on: metrics)
        Self.fill(cache, "a")
        _ = cache.lookup("a", now: Self.now)
        _ = cache.lookup("b", now: Self.now)
        Self.fill(cache, "b")
        cache.received(Self.changed("b"))
        let text = metrics.render()
        for line in [
            "# TYPE entitlement_cache_hits_total counter", "entitlement_cache_hits_total 1", "entitlement_cache_misses_total 1",
            "entitlement_cache_evictions_total 1", "entitlement_cache_invalidations_total 1", "entitlement_cache_clears_total 1",
            "# TYPE entitlement_cache_entries gauge", "entitlement_cache_entries 0", "entitlement_cache_listening 1",
        ] {
            #expect(text.contains(line + "\n"), "\(line) in \(text)")
        }
    }
}
