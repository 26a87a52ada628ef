import Testing
@testable import EntitlementService

/// The CLOCK map behind `EntitlementCache`, and the log its tickets are checked against.
@Suite struct ClockCacheTests {
    @Test func neverHoldsMoreThanItsCapacity() {
        var cache = ClockCache<Int, String>(capacity: 3)
        var evicted: [Int] = []
        for key in 0..<10 {
            if let gone = cache.insert("v\(key)", for: key) { evicted.append(gone) }
            #expect(cache.count == min(key + 1, 3))
        }
        #expect(evicted == Array(0..<7), "untouched entries go oldest first")
        #expect(cache.value(for: 9) == "v9" && cache.value(for: 6) == nil)
    }

    @Test func aReadEntryGetsASecondChance() {
        var cache = ClockCache<String, Int>(capacity: 3)
        cache.insert(1, for: "a")
        cache.insert(2, for: "b")
        cache.insert(3, for: "c")
        #expect(cache.value(for: "a") == 1)
        #expect(cache.insert(4, for: "d") == "b", "a was read since it came in; b was not")
        #expect(cache.insert(5, for: "e") == "c")
        #expect(cache.insert(6, for: "f") == "a", "a's second chance was used up by the first sweep")
    }

    @Test func replacingAndRemovingKeepTheCount() {
        var cache = ClockCache<String, Int>(capacity: 2)
        cache.insert(1, for: "a")
        #expect(cache.insert(2, for: "a") == nil)
        #expect(cache.value(for: "a") == 2 && cache.count == 1)
        cache.insert(3, for: "b")
        let removed = cache.remove("a"), removedAgain = cache.remove("a")
        #expect(removed && !removedAgain)
        #expect(cache.insert(4, for: "c") == nil, "the removed entry's slot is reused before anything is evicted")
        #expect(cache.count == 2 && cache.value(for: "b") == 3 && cache.value(for: "c") == 4)
        cache.removeAll()
        #expect(cache.count == 0 && cache.value(for: "b") == nil)
        cache.insert(5, for: "d")
        #expect(cache.value(for: "d") == 5)
    }

    @Test func aTicketIsCurrentUntilItsUserOrEveryoneIsInvalidated() {
        var log = InvalidationLog()
        log.invalidate("u")
        let noted = log.sequence
        #expect(log.isCurrent("u", since: noted), "an invalidation before the ticket does not count")
        log.invalidate("v")
        #expect(log.isCurrent("u", since: noted))
        #expect(!log.isCurrent("v", since: noted))
        log.invalidate("u")
        #expect(!log.isCurrent("u", since: noted))
        let later = log.sequence
        #expect(log.isCurrent("u", since: later))
        log.invalidateAll()
        #expect(!log.isCurrent("u", since: later) && !log.isCurrent("w", since: later))
        #expect(log.isCurrent("u", since: log.sequence))
    }

    @Test func forgettingAnInvalidationRefusesOlderTicketsOnly() {
        var log = InvalidationLog(limit: 2)
        let old = log.sequence
        log.invalidate("a")
        let middle = log.sequence
        log.invalidate("b")
        log.invalidate("c")  // forgets a's invalidation
        #expect(!log.isCurrent("z", since: old), "a ticket older than a forgotten invalidation is refused")
        #expect(log.isCurrent("z", since: middle), "one taken after it is not")
        #expect(!log.isCurrent("b", since: middle) && !log.isCurrent("c", since: middle))
        #expect(log.isCurrent("a", since: middle))
    }
}

extension ClockCache {
    /// A copy of the value for `key`, marked as recently used, as a read through `withValue` leaves it.
    mutating func value(for key: Key) -> Value? { withValue(for: key) { $0 } }
}
