import Testing
@testable import EntitlementService
@testable import FakeAppStore

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

    /// Random inserts, reads and removals against a plain dictionary: the cache holds exactly what the model
    /// says (what it reports evicting leaves both), never more than its capacity, and evicts only when full.
    @Test func agreesWithAModelOverRandomOperations() {
        var generator = SplitMix64(seed: 42)
        var cache = ClockCache<Int, Int>(capacity: 8)
        var model: [Int: Int] = [:]
        for step in 0..<20_000 {
            let key = Int(generator.next() % 40)
            switch generator.next() % 4 {
            case 0, 1:
                let wasFull = model.count == 8 && model[key] == nil
                if let evicted = cache.insert(step, for: key) {
                    #expect(wasFull && evicted != key && model[evicted] != nil, "step \(step)")
                    model[evicted] = nil
                } else {
                    #expect(!wasFull, "step \(step): a full cache made room without saying whom it evicted")
                }
                model[key] = step
            case 2:
                #expect(cache.remove(key) == (model.removeValue(forKey: key) != nil), "step \(step)")
            default:
                #expect(cache.value(for: key) == model[key], "step \(step)")
            }
            #expect(cache.count == model.count && cache.count <= 8)
            if step % 5_000 == 4_999 {
                cache.removeAll()
                model.removeAll()
            }
        }
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
