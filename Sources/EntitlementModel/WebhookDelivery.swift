import Foundation

/// Where an event's delivery to `WEBHOOK_URL` stands.
public enum WebhookDeliveryStatus: String, Sendable, Hashable, Codable, CaseIterable {
    /// Recorded while no `WEBHOOK_URL` was configured: never sent.
    case none
    /// Waiting for its first attempt or for a retry.
    case pending
    /// A receiver answered 2xx.
    case delivered
    /// Retried for the whole retry window without a 2xx.
    case failed
}

/// How one attempt to send an event ended.
public enum WebhookAttemptOutcome: Sendable, Hashable {
    /// The receiver answered with this HTTP status.
    case response(status: Int)
    /// No answer: a timeout, a refused or dropped connection, a TLS failure.
    case noResponse
}

/// What to do with an event after an attempt.
public enum WebhookDeliveryDecision: Sendable, Hashable {
    case delivered
    /// Send it again at this instant.
    case retry(at: Date)
    /// Give up: the retry window has ended.
    case failed
}

/// The Standard Webhooks retry rule: any 2xx is delivered; anything else is retried with backoff (from `base`,
/// doubling per attempt, each wait between half and all of its doubled value, at most `max`) until `window` after
/// the event became pending: a wait that would end past the window ends with it, in a last attempt at its end, and
/// an attempt that fails once the window has ended leaves the event `failed`.
public struct WebhookRetryPolicy: Sendable, Equatable {
    /// The backoff between attempts (`baseMs` doubling up to `maxMs`, scaled by jitter).
    public var schedule: RetrySchedule
    /// How long after it became pending an event is still tried.
    public var window: TimeInterval

    /// 5 s doubling to at most 1 hour, for 3 days.
    public static let standard = WebhookRetryPolicy(schedule: RetrySchedule(baseMs: 5_000, maxMs: 3_600_000),
                                                    window: 3 * 86_400)

    /// A policy with this backoff and a `window` in seconds; nothing is validated.
    public init(schedule: RetrySchedule, window: TimeInterval) {
        self.schedule = schedule
        self.window = window
    }

    /// The decision after attempt number `attempt` (1 for the first send) ended with `outcome` at `now`, for an
    /// event pending since `pendingSince`; `jitter` in 0.5...1 scales the wait.
    public func decide(_ outcome: WebhookAttemptOutcome, attempt: Int, pendingSince: Date, now: Date,
                       jitter: Double) -> WebhookDeliveryDecision {
        if case .response(let status) = outcome, (200...299).contains(status) { return .delivered }
        let end = pendingSince.addingTimeInterval(window)
        guard now < end else { return .failed }
        return .retry(at: min(now.addingTimeInterval(Double(schedule.delayMs(attempt: attempt, jitter: jitter)) / 1_000), end))
    }
}
