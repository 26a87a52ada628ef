/// What the fake App Store Server API answered since its start (or reset), and whether its clients held back
/// after each 429 until its `Retry-After`, as `GET /control/server-api/requests` reports it. Pure: times are
/// milliseconds since 1970, passed in.
///
/// A 429 holds every request of the app (Apple's rule) from the moment it is answered until its
/// `Retry-After`. A request that arrives more than `inFlightMs` after that moment and before that time is
/// early: the client knew and did not wait (requests sent before the 429 reached the client arrive within
/// `inFlightMs`). A hold that ends without an early request was honoured.
struct FakeServerAPITally {
    /// How long after a 429 is answered a request may still have been on its way.
    static let inFlightMs: Int64 = 250

    /// Answers by HTTP status (dropped connections are not answered).
    var statuses: [Int: Int] = [:]
    /// Requests answered with a fault of the fault rate (any kind of the mix).
    var faults = 0
    /// Connections closed without an answer.
    var dropped = 0
    /// Requests that arrived during a hold, after `inFlightMs`.
    private(set) var early = 0
    /// The longest hold (from its 429's answer to its `Retry-After`) no request broke, in milliseconds.
    private(set) var longestHonouredMs: Int64 = 0

    /// The hold in force: when its latest 429 was answered, until when, and whether a request broke it.
    private var hold: (answeredAt: Int64, until: Int64, broken: Bool)?

    /// A 429 answered at `answeredAt` with `Retry-After` `until`; a later 429 extends the hold, never shortens it.
    mutating func rateLimited(answeredAt: Int64, until: Int64) {
        guard until > answeredAt else { return }
        if let current = hold, current.until >= until { return }
        if let current = hold, current.until > answeredAt {
            hold = (current.answeredAt, until, current.broken)
        } else {
            hold = (answeredAt, until, false)
        }
    }

    /// A request arrived at `now`.
    mutating func arrived(now: Int64) {
        guard var current = hold else { return }
        if now >= current.until {
            if !current.broken { longestHonouredMs = max(longestHonouredMs, current.until - current.answeredAt) }
            hold = nil
        } else if now > current.answeredAt + Self.inFlightMs {
            early += 1
            current.broken = true
            hold = current
        }
    }
}
