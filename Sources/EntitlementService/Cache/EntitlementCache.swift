import ServiceRuntime
import Foundation

/// The encoded answers of `GET /v1/users/{user_id}/entitlements` (now) of recently read users, kept in this
/// process until the user's data changes or the answer's own `validUntil` passes.
///
/// Changes are heard through PostgreSQL: the triggers of `migrations/0003_change_notifications.sql` announce
/// every changed user on `changesChannel` (`*`: everyone) when the change commits, and the service's
/// `PostgresListener` hands each notification to `received(_:)` and its state to `listenerChanged(listening:)`.
/// Without a listening listener nothing would tell the cache of a change, so it serves and keeps nothing; when
/// the listener (re)starts listening, the cache starts empty, since notifications may have been missed.
///
/// Filling is race-free with a ticket: a reader takes `ticket(for:)` before it reads the database and hands
/// it back to `store`, which keeps the answer only if no invalidation of that user (and no clearing) came in
/// between, so an answer read before a change the cache has already heard of is never kept:
///
///     if let body = cache.lookup(userID, now: now) { answer(body) } else {
///         let ticket = cache.ticket(for: userID)
///         let document = try await reader.document(userID: userID, at: now)
///         let body = encode(document)
///         cache.store(EntitlementsAnswer(body: body, asOf: now)!, validUntil: document.nextChange, for: ticket)
///         answer(body)
///     }
///
/// A request that changed data calls `barrier()` before answering, so the change's own notifications have
/// reached this cache by the time the client can ask again. Where `WORKERS` copies share the address, a client's
/// next read may reach another copy, whose listener may not have heard the change yet: every copy's barrier
/// counts its write in a counter they share (`writes`), its token carries the count, and a copy serves only
/// while it has heard a token carrying the latest count (or, if none comes, after a barrier of its own). Plain
/// Swift on the loop: no lock anywhere.
@Loop
final class EntitlementCache {
    /// The channel the triggers announce changed users on.
    static let changesChannel = "entitlements_changed"
    /// The payload on `changesChannel` that means every user: empty, which no user id is (migration 0016; `*`
    /// before it, which is one).
    static let everyone = ""
    /// The channel barriers send their tokens on.
    static let syncChannel = "entitlements_sync"

    /// How the cache's listener is run: both channels, a ping every 250 ms, and listening only while a ping sent
    /// in the last 750 ms has answered, so that a connection that stalls without closing stops the cache well
    /// within the 1 s in which every instance must see a change.
    static func listenerSettings(conninfo: String) -> PostgresListener.Settings {
        var settings = PostgresListener.Settings(conninfo: conninfo, channels: [changesChannel, syncChannel])
        settings.pingIntervalMs = 250
        settings.answerWindowMs = 750
        return settings
    }

    /// Proof of when a reader started: `store` keeps its answer only if nothing invalidated the user since.
    struct Ticket: Sendable {
        let userID: String
        fileprivate let sequence: UInt64
    }

    private struct Entry {
        var answer: EntitlementsAnswer
        var validUntil: Date?

        /// The answer as of `now`, stamped with `stamp` (`now`'s second); nil once `validUntil` has come.
        mutating func body(at now: Date, stamp: AsOfStamp) -> [UInt8]? {
            if let validUntil, now >= validUntil { return nil }
            return answer.body(stamp: stamp)
        }
    }

    /// The most users held; 0 disables the cache.
    let capacity: Int
    /// How long a barrier waits for its token before clearing the cache instead.
    let barrierTimeoutMs: UInt64
    /// True while the listener is listening: only then does the cache serve and keep answers.
    private(set) var isListening = false

    private var entries: ClockCache<String, Entry>?
    /// The `as_of` of answers served in the current second, written once for all of them.
    private var stamp = AsOfStamp(Date(timeIntervalSince1970: 0))
    private var log = InvalidationLog()
    let db: any PostgresQueryable
    let syncs = SyncWaiters()
    private let tokenPrefix = String(UInt64.random(in: 0...UInt64.max), radix: 36)
    private var lastToken = 0
    private let onClear: @Loop () -> Void
    /// Writes answered by this process and the copies sharing its address; nil when it serves alone.
    let writes: SharedCounter?
    /// `writes.id` as carried by tokens.
    private let writesTag: String
    /// The highest count of `writes` carried by a token the listener has heard (or read when the cache was
    /// cleared): every change answered before that count is known here.
    private var heardWrites: UInt64 = 0
    /// When a read first found `writes` ahead of `heardWrites`, while it still is.
    private var behindSince: Date?
    /// True while a barrier started by a read that found the cache behind is under way.
    private var catchingUp = false

    private(set) var hits = 0
    private(set) var misses = 0
    private(set) var evictions = 0
    private(set) var invalidations = 0
    private(set) var clears = 0
    /// Barriers run (``barrier()``): one per answered write while the cache serves.
    var barriers = 0

    /// - Parameters:
    ///   - capacity: the most users held (`ENTITLEMENT_CACHE_SIZE`); 0 disables the cache.
    ///   - db: where barriers send their tokens (the pool).
    ///   - barrierTimeoutMs: how long a barrier waits for its token.
    ///   - writes: the count of answered writes this process shares with its `WORKERS` copies; nil alone.
    ///   - onClear: called whenever the cache empties because anything may have changed (a `*` announcement,
    ///     the listener's loss or return, a barrier that timed out), for caches the answers are built from
    ///     (the catalog).
    init(capacity: Int, db: any PostgresQueryable, barrierTimeoutMs: UInt64 = 1_000, writes: SharedCounter? = nil,
         onClear: @escaping @Loop () -> Void = {}) {
        self.capacity = capacity
        self.db = db
        self.barrierTimeoutMs = barrierTimeoutMs
        self.writes = writes
        writesTag = writes.map { String($0.id, radix: 36) } ?? ""
        self.onClear = onClear
        entries = capacity > 0 ? ClockCache(capacity: capacity) : nil
    }

    /// True when the cache may answer: enabled and listening, within the listener's answer window on the loop's
    /// clock now (a process paused past the window answers the requests of its wake-up before the listener's timer
    /// says it stopped listening).
    var isServing: Bool { entries != nil && isListening && EventLoop.shared.now < listeningUntil }

    /// The end of the listener's answer window (loop time, ms), from `PostgresListener`'s `onWindow`; no end for a
    /// listener without one, or a cache fed by hand.
    private var listeningUntil = UInt64.max

    /// The listener's answer window now ends at `end` (loop time, ms).
    func listenerWindow(endsAt end: UInt64) {
        listeningUntil = end
    }

    /// How long a read waits for a write's token to come before it makes the cache catch up by itself.
    static let catchUpAfter: TimeInterval = 0.05

    /// The number of users held.
    var count: Int { entries?.count ?? 0 }

    // MARK: - Reading and filling

    /// `userID`'s stored answer as of `now` if it is still valid then; nil (a miss) otherwise.
    func lookup(_ userID: String, now: Date) -> [UInt8]? {
        if !stamp.covers(now) { stamp = AsOfStamp(now) }
        let stamp = stamp
        guard isServing, hasHeardEveryWrite(now: now),
              let held = entries?.withValue(for: userID, { $0.body(at: now, stamp: stamp) }) else {
            misses += 1
            return nil
        }
        guard let body = held else {
            entries?.remove(userID)
            misses += 1
            return nil
        }
        hits += 1
        return body
    }

    /// Taken before reading `userID`'s data from the database, for `store`.
    func ticket(for userID: String) -> Ticket {
        Ticket(userID: userID, sequence: log.sequence)
    }

    /// Keeps `answer`, read under `ticket`, until `validUntil` (nil: until the user's data changes), unless the
    /// user was invalidated or the cache cleared since the ticket was taken, or the cache is not serving.
    /// Returns whether it was kept.
    @discardableResult
    func store(_ answer: EntitlementsAnswer, validUntil: Date?, for ticket: Ticket) -> Bool {
        guard isServing, log.isCurrent(ticket.userID, since: ticket.sequence) else { return false }
        if entries?.insert(Entry(answer: answer, validUntil: validUntil), for: ticket.userID) != nil { evictions += 1 }
        return true
    }

    /// True unless a copy sharing this address answered a write whose token the listener has not heard yet
    /// (its change may not have reached this cache, nor what else is built from data of before, such as the
    /// catalog's cached copy). A read that finds the cache behind for longer than `catchUpAfter` (the writer died
    /// before sending its token, or could not send it) starts a barrier.
    func hasHeardEveryWrite(now: Date) -> Bool {
        guard let writes else { return true }
        let count = writes.value
        guard count > heardWrites else {
            behindSince = nil
            return true
        }
        guard let since = behindSince else {
            behindSince = now
            return false
        }
        if !catchingUp, now.timeIntervalSince(since) > Self.catchUpAfter {
            catchingUp = true
            Task.onLoop {
                await self.sync(count: writes.value)
                self.catchingUp = false
            }
        }
        return false
    }

    // MARK: - Hearing of changes

    /// A notification from the listener: a changed user, everyone (`*`), or a barrier's token.
    func received(_ notification: PostgresNotification) {
        switch notification.channel {
        case Self.changesChannel where notification.payload == Self.everyone:
            clear()
        case Self.changesChannel:
            invalidate(notification.payload)
        case Self.syncChannel:
            if let count = writesCount(in: notification.payload) { heardWrites = max(heardWrites, count) }
            syncs.arrived(notification.payload)
        default:
            break
        }
    }

    /// The listener started (`true`) or stopped listening. Either way the cache empties: while the listener is
    /// down changes go unheard, and the notifications of that time are lost for good.
    func listenerChanged(listening: Bool) {
        isListening = listening
        clear()
        if !listening { syncs.abandonAll() }
    }

    /// Drops `userID`'s answer; answers read under earlier tickets will not be kept.
    func invalidate(_ userID: String) {
        log.invalidate(userID)
        entries?.remove(userID)
        invalidations += 1
    }

    /// Drops every answer; answers read under earlier tickets will not be kept.
    func clear() {
        // Answers kept from now on are read after every write counted so far.
        if let writes { heardWrites = max(heardWrites, writes.value) }
        log.invalidateAll()
        entries?.removeAll()
        clears += 1
        onClear()
    }

    /// A token no other barrier of any process uses, carrying `count` of `writes` when given
    /// (`prefix.n/writes-id/count`).
    func nextToken(count: UInt64? = nil) -> String {
        lastToken += 1
        guard let count else { return "\(tokenPrefix).\(lastToken)" }
        return "\(tokenPrefix).\(lastToken)/\(writesTag)/\(count)"
    }

    /// The count of this process's `writes` a token carries; nil for tokens of other groups and without one.
    private func writesCount(in token: String) -> UInt64? {
        guard writes != nil else { return nil }
        let parts = token.split(separator: "/")
        guard parts.count == 3, parts[1] == writesTag else { return nil }
        return UInt64(parts[2])
    }

    // MARK: - Metrics

    /// Registers the cache's counters and gauges (`entitlement_cache_*`) with `metrics`.
    func registerMetrics(on metrics: Metrics) {
        metrics.counter("entitlement_cache_hits_total", "Entitlement reads answered from the cache") { [unowned self] in Double(hits) }
        metrics.counter("entitlement_cache_misses_total", "Entitlement reads the cache could not answer") { [unowned self] in Double(misses) }
        metrics.counter("entitlement_cache_evictions_total", "Cached users evicted to make room") { [unowned self] in Double(evictions) }
        metrics.counter("entitlement_cache_invalidations_total", "Changed users announced to the cache") { [unowned self] in Double(invalidations) }
        metrics.counter("entitlement_cache_clears_total", "Times the whole cache was emptied") { [unowned self] in Double(clears) }
        metrics.counter("entitlement_cache_barriers_total", "Writes whose answer waited until this instance heard of their change") {
            [unowned self] in Double(barriers)
        }
        metrics.gauge("entitlement_cache_entries", "Users in the entitlement cache") { [unowned self] in Double(count) }
        metrics.gauge("entitlement_cache_listening", "1 while the cache hears of changes (and so serves), else 0") { [unowned self] in
            isServing ? 1 : 0
        }
    }
}
