/// Which invalidations happened since a given moment, so a cache filled by a slow reader never keeps an
/// answer read before a change it already heard of.
///
/// Every invalidation takes the next number of `sequence`; a reader notes `sequence` before it reads the
/// database and may keep its answer only if `isCurrent` says no invalidation of its user, and no clearing,
/// came after. The log remembers the last `limit` invalidated users; forgetting one raises `floor`, below
/// which every reader is refused (a reader that old is rare: reads take milliseconds).
struct InvalidationLog {
    /// The number of the latest invalidation or clearing.
    private(set) var sequence: UInt64 = 0
    /// Readers that started before this were overtaken by a clearing or by an invalidation no longer remembered.
    private var floor: UInt64 = 0
    /// The latest invalidation of each remembered user.
    private var latest: [String: UInt64] = [:]
    /// The remembered invalidations, a ring of `limit` slots whose oldest is at `oldest` once it is full.
    private var ring: [(userID: String, sequence: UInt64)] = []
    private var oldest = 0
    /// The most invalidations remembered.
    let limit: Int

    init(limit: Int = 8_192) {
        precondition(limit > 0, "the log remembers at least one invalidation")
        self.limit = limit
    }

    /// Records that `userID`'s data changed.
    mutating func invalidate(_ userID: String) {
        sequence += 1
        latest[userID] = sequence
        guard ring.count == limit else {
            ring.append((userID, sequence))
            return
        }
        let forgotten = ring[oldest]
        if latest[forgotten.userID] == forgotten.sequence { latest[forgotten.userID] = nil }
        floor = max(floor, forgotten.sequence)
        ring[oldest] = (userID, sequence)
        oldest = (oldest + 1) % limit
    }

    /// Records that anyone's data may have changed.
    mutating func invalidateAll() {
        sequence += 1
        floor = sequence
        latest.removeAll()
        ring.removeAll()
        oldest = 0
    }

    /// True when neither `userID` nor everyone was invalidated after `sequence` was noted.
    func isCurrent(_ userID: String, since noted: UInt64) -> Bool {
        noted >= floor && (latest[userID] ?? 0) <= noted
    }
}
