/// Exponential backoff with jitter for background retries of unanswered verifications.
public struct RetrySchedule: Sendable, Equatable {
    /// The first retry's delay before jitter, in milliseconds; doubled for each later attempt.
    public var baseMs: Int
    /// The cap on the doubled delay before jitter, in milliseconds; never below `baseMs`.
    public var maxMs: Int

    /// A schedule starting at `baseMs`; a `maxMs` below it is raised to `baseMs`.
    public init(baseMs: Int, maxMs: Int) {
        self.baseMs = baseMs
        self.maxMs = max(baseMs, maxMs)
    }

    /// The delay before retry number `attempt` (1 for the first background retry): `baseMs` doubled per
    /// earlier attempt, capped at `maxMs`, then scaled by `jitter` in 0.5...1.0 ("equal jitter") so that
    /// many submissions failing together do not retry together.
    public func delayMs(attempt: Int, jitter: Double) -> Int {
        let doublings = max(0, min(attempt - 1, 40))
        let ceiling = baseMs.multipliedReportingOverflow(by: 1 << doublings)
        let capped = ceiling.overflow ? maxMs : min(ceiling.partialValue, maxMs)
        let factor = min(1.0, max(0.5, jitter))
        return max(1, Int(Double(capped) * factor))
    }

    /// `delayMs` with a fresh random jitter.
    public func randomDelayMs(attempt: Int) -> Int {
        delayMs(attempt: attempt, jitter: Double.random(in: 0.5...1.0))
    }
}
