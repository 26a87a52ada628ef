/// A map of at most `capacity` entries that evicts with the CLOCK algorithm (second chance): a hit only sets
/// the entry's reference bit, and a full map's insert sweeps a hand over the slots, clearing set bits and
/// evicting the first entry whose bit is clear. It approximates least-recently-used at the cost of a flag per
/// hit instead of a list update.
struct ClockCache<Key: Hashable, Value> {
    private struct Slot {
        var key: Key
        var value: Value
        var referenced: Bool
    }

    /// The most entries held at once (at least 1).
    let capacity: Int
    private var slots: [Slot?] = []
    private var index: [Key: Int] = [:]
    /// Slots emptied by `remove`, reused before anything is evicted.
    private var free: [Int] = []
    private var hand = 0

    init(capacity: Int) {
        precondition(capacity > 0, "a clock cache holds at least one entry")
        self.capacity = capacity
    }

    /// The number of entries held.
    var count: Int { index.count }

    /// `body` run on the value for `key` in place (no copy of it), the entry marked as recently used; nil when
    /// absent.
    mutating func withValue<R>(for key: Key, _ body: (inout Value) -> R) -> R? {
        guard let position = index[key] else { return nil }
        slots[position]!.referenced = true
        return body(&slots[position]!.value)
    }

    /// Sets the value for `key`; returns the key evicted to make room, if one was.
    @discardableResult
    mutating func insert(_ value: Value, for key: Key) -> Key? {
        if let position = index[key] {
            slots[position] = Slot(key: key, value: value, referenced: true)
            return nil
        }
        var evicted: Key?
        let position: Int
        if let reusable = free.popLast() {
            position = reusable
        } else if slots.count < capacity {
            slots.append(nil)
            position = slots.count - 1
        } else {
            position = victim()
            evicted = slots[position]!.key
            index[evicted!] = nil
        }
        // New entries start unreferenced: one that is never read again is the next to go.
        slots[position] = Slot(key: key, value: value, referenced: false)
        index[key] = position
        return evicted
    }

    /// Removes `key`'s entry; true when there was one.
    @discardableResult
    mutating func remove(_ key: Key) -> Bool {
        guard let position = index.removeValue(forKey: key) else { return false }
        slots[position] = nil
        free.append(position)
        return true
    }

    /// Removes every entry.
    mutating func removeAll() {
        slots.removeAll()
        index.removeAll()
        free.removeAll()
        hand = 0
    }

    /// The slot to evict in a full map with no free slot: the first unreferenced one from the hand on,
    /// clearing reference bits on the way (so at most one full turn passes before one is found).
    private mutating func victim() -> Int {
        while true {
            let position = hand
            hand = (hand + 1) % slots.count
            if slots[position]!.referenced {
                slots[position]!.referenced = false
            } else {
                return position
            }
        }
    }
}
