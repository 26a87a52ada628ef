import Foundation

/// When the next request to Apple may go out: Apple's own 429 wait, shared by every request of the app, and
/// a budget per endpoint (a token bucket) so that a backlog never trips Apple's limit in the first place.
/// Pure: the caller passes the time and waits (on a loop timer) until the instant it is given.
public struct RequestBudget: Sendable {
    /// One endpoint's allowance: `ratePerSecond` requests on average, at most `burst` at once.
    public struct Allowance: Sendable, Hashable {
        /// Tokens refilled per second: the endpoint's long-run request rate; above zero.
        public var ratePerSecond: Double
        /// The bucket's size: how many requests may go out back to back after a quiet spell; at least 1.
        public var burst: Double

        /// An allowance; traps unless `ratePerSecond` is above zero and `burst` at least 1.
        public init(ratePerSecond: Double, burst: Double) {
            precondition(ratePerSecond > 0 && burst >= 1, "an allowance needs a positive rate and a burst of at least 1")
            self.ratePerSecond = ratePerSecond
            self.burst = burst
        }
    }

    private struct Bucket: Sendable {
        var tokens: Double
        var updated: Date
    }

    private let allowances: [String: Allowance]
    private let defaultAllowance: Allowance
    private var buckets: [String: Bucket] = [:]
    /// Apple's latest `Retry-After`: nothing goes out before it.
    public private(set) var blockedUntil: Date?

    /// A budget with `allowances` by endpoint name and `defaultAllowance` for the others.
    public init(allowances: [String: Allowance] = [:], defaultAllowance: Allowance) {
        self.allowances = allowances
        self.defaultAllowance = defaultAllowance
    }

    /// Takes one request's place for `endpoint` at `now`: returns nil when it may go out now (its token is
    /// spent), else the instant to ask again (nothing is spent).
    public mutating func admit(_ endpoint: String, now: Date) -> Date? {
        if let blockedUntil, now < blockedUntil { return blockedUntil }
        let allowance = allowances[endpoint] ?? defaultAllowance
        var bucket = buckets[endpoint] ?? Bucket(tokens: allowance.burst, updated: now)
        let elapsed = max(0, now.timeIntervalSince(bucket.updated))
        bucket.tokens = min(allowance.burst, bucket.tokens + elapsed * allowance.ratePerSecond)
        bucket.updated = now
        defer { buckets[endpoint] = bucket }
        guard bucket.tokens >= 1 else {
            return now.addingTimeInterval((1 - bucket.tokens) / allowance.ratePerSecond)
        }
        bucket.tokens -= 1
        return nil
    }

    /// Apple answered 429: every endpoint waits until `until` (a later wait never shortens to an earlier
    /// one). Without a time, `fallback` after `now`.
    public mutating func rateLimited(until: Date?, now: Date, fallback: TimeInterval = 60) {
        let wait = until ?? now.addingTimeInterval(fallback)
        blockedUntil = max(blockedUntil ?? wait, wait)
    }
}
