/// A map of at most `capacity` entries that evicts with the CLOCK algorithm (second chance): a hit only sets
/// the entry's reference bit, and a full map's insert sweeps a hand over the slots, clearing set bits and
/// evicting the first entry whose bit is clear. It approximates least-recently-used at the cost of a flag per
/// hit instead of a list update.
///
/// Entries live in the dictionary's own storage, so a hit reads one key and one value there and nothing
/// else; the clock's slots (the keys in the order they came, for the hand) are read only when making room.
struct ClockCache<Key: Hashable, Value> {
    private struct Entry {
        var value: Value
        var referenced: Bool
        /// Where the key sits in `slots`.
        var slot: Int
    }

    /// The most entries held at once (at least 1).
    let capacity: Int
    private var entries: [Key: Entry] = [:]
    /// The keys in clock order; nil where `remove` emptied a slot.
    private var slots: [Key?] = []
    /// Slots emptied by `remove`, reused before anything is evicted.
    private var free: [Int] = []
    private var hand = 0

    init(capacity: Int) {
        precondition(capacity > 0, "a clock cache holds at least one entry")
        self.capacity = capacity
    }

    /// The number of entries held.
    var count: Int { entries.count }

    /// `body` run on the value for `key` in place (no copy of it), the entry marked as recently used; nil when
    /// absent.
    mutating func withValue<R>(for key: Key, _ body: (inout Value) -> R) -> R? {
        guard let position = entries.index(forKey: key) else { return nil }
        entries.values[position].referenced = true
        return body(&entries.values[position].value)
    }

    /// Sets the value for `key`; returns the key evicted to make room, if one was.
    @discardableResult
    mutating func insert(_ value: Value, for key: Key) -> Key? {
        if let position = entries.index(forKey: key) {
            entries.values[position].value = value
            entries.values[position].referenced = true
            return nil
        }
        var evicted: Key?
        let slot: Int
        if let reusable = free.popLast() {
            slot = reusable
        } else if slots.count < capacity {
            slots.append(nil)
            slot = slots.count - 1
        } else {
            slot = victim()
            evicted = slots[slot]!
            entries[evicted!] = nil
        }
        // New entries start unreferenced: one that is never read again is the next to go.
        slots[slot] = key
        entries[key] = Entry(value: value, referenced: false, slot: slot)
        return evicted
    }

    /// Removes `key`'s entry; true when there was one.
    @discardableResult
    mutating func remove(_ key: Key) -> Bool {
        guard let entry = entries.removeValue(forKey: key) else { return false }
        slots[entry.slot] = nil
        free.append(entry.slot)
        return true
    }

    /// Removes every entry.
    mutating func removeAll() {
        entries.removeAll()
        slots.removeAll()
        free.removeAll()
        hand = 0
    }

    /// The slot to evict in a full map with no free slot: the first unreferenced one from the hand on,
    /// clearing reference bits on the way (so at most one full turn passes before one is found).
    private mutating func victim() -> Int {
        while true {
            let slot = hand
            hand = (hand + 1) % slots.count
            let position = entries.index(forKey: slots[slot]!)!
            if entries.values[position].referenced {
                entries.values[position].referenced = false
            } else {
                return slot
            }
        }
    }
}
