import AppStore
import ServiceRuntime
import EntitlementModel
import Foundation

/// Recovers the App Store notifications the service missed (down, unreachable, or answering errors) from
/// Apple's Get Notification History, at start and every `NOTIFICATION_HISTORY_INTERVAL_S`, for each
/// environment the service accepts: from the last notification received (or the end of the previous complete
/// run, when earlier) minus 1 hour, never more than 180 days back, to now, every page. Each notification goes
/// through `NotificationIntake`, the notification route's own path: verified, stored once per
/// `notificationUUID`, applied, so what was received already changes nothing.
///
/// A run is a row of `NotificationHistoryStore` claimed with `FOR UPDATE SKIP LOCKED` under a lease, so two
/// instances never fetch one environment at once; its window and the page it reached are kept after every
/// page, so a crash (the lease ends and any instance takes over), a shutdown (the run is cancelled between pages
/// or in a page's request, and released) or an Apple outage (the run is postponed with backoff, to Apple's
/// `Retry-After` after a 429) resumes where it stopped.
@Loop
enum NotificationHistoryWorker {
    /// How long a claim holds without news; every page extends it. A page waits for Apple (its rate limit,
    /// retries with backoff) at most the client's default call time (10 s), well inside it; longer, the run is
    /// postponed and the claim released.
    static let lease = Duration.seconds(60)
    /// Apple refuses a `startDate` more than 180 days back; a minute's margin covers the time to the request.
    static let oldestStart: TimeInterval = 180 * 86_400 - 60
    /// How far before the last notification received (or the last complete run's end) a window starts.
    static let overlap: TimeInterval = 3_600

    /// What the worker needs: where notifications go, Apple, and when to look.
    struct Settings {
        var intake: NotificationIntake
        var client: ServerAPIClient
        /// The environments to fetch (those whose signed payloads the service accepts).
        var environments: [StoreEnvironment]
        /// `NOTIFICATION_HISTORY_INTERVAL_S`: from one complete run to the next.
        var interval: Duration
        /// The backoff after runs Apple could not finish.
        var retry: RetrySchedule
    }

    /// The worker, looking for a due run every `pollMs` (the schedule itself is in the table).
    static func make(_ settings: Settings, pollMs: UInt64) -> PeriodicWorker {
        PeriodicWorker(name: "notification-history", intervalMs: pollMs, cancelsOnStop: true) { try await runDue(settings) }
    }

    /// Makes every environment's run due now (unless an instance holds it): the fetch at start.
    static func dueAtStart(_ settings: Settings) async throws {
        try await NotificationHistoryStore().runNow(settings.environments.map(\.rawValue), on: settings.intake.db)
    }

    /// Claims one due run and carries it out; true when one was due (another may be). A database failure is
    /// thrown to the worker: the run stays claimed until its lease ends, then resumes at its page.
    static func runDue(_ settings: Settings) async throws -> Bool {
        let store = NotificationHistoryStore()
        guard var run = try await store.claim(settings.environments.map(\.rawValue), lease: lease, on: settings.intake.db),
              let environment = StoreEnvironment(rawValue: run.environment) else { return false }
        let resumed = run.windowStart != nil
        if run.windowStart == nil || run.windowEnd == nil {
            let last = try await NotificationStore().lastReceived(in: run.environment, on: settings.intake.db)
            let (start, end) = window(lastReceived: last, coveredUntil: run.coveredUntil, now: Date())
            guard try await store.begin(run, start: start, end: end, on: settings.intake.db) else { return takenOver(run) }
            (run.windowStart, run.windowEnd, run.paginationToken) = (start, end, nil)
        }
        let start = run.windowStart!, end = run.windowEnd!
        Log.info("notification_history_run", ["environment": run.environment, "window_start": RFC3339.string(from: start),
                                               "window_end": RFC3339.string(from: end), "attempt": run.attempts, "resumed": resumed,
                                               "from_page": run.paginationToken != nil])
        var tally = Tally()
        while true {
            // Shutting down (the worker cancels its run): the run is released at the page reached, as Apple's
            // interruption would leave it (the page asked meanwhile is cancelled too, and ends here as well).
            guard !Task.isCancelled else {
                return try await postpone(run, .retryLater(until: nil, detail: "the service is shutting down", appleStatus: nil), tally, settings)
            }
            let result = await settings.client.notificationHistoryPage(
                environment: environment, start: start, end: end, paginationToken: run.paginationToken)
            guard case .answered(let page, _) = result else {
                return try await postpone(run, result, tally, settings)
            }
            for item in page.notifications {
                tally.count(try await take(item, settings.intake), environment: run.environment)
            }
            for detail in page.refused {
                Log.warning("notification_history_refused", ["environment": run.environment, "error": detail])
                tally.count(.refused, environment: run.environment)
            }
            tally.pages += 1
            guard let next = page.nextPaginationToken else { break }
            guard try await store.advance(run, to: next, lease: lease, on: settings.intake.db) else { return takenOver(run) }
            run.paginationToken = next
        }
        guard try await store.complete(run, interval: settings.interval, on: settings.intake.db) else { return takenOver(run) }
        Metrics.shared.increment(runsMetric, runsHelp, labels: ["environment": run.environment, "outcome": "completed"])
        Log.info("notification_history_completed", ["environment": run.environment, "window_start": RFC3339.string(from: start),
                                                     "window_end": RFC3339.string(from: end), "pages": tally.pages, "stored": tally[.stored],
                                                     "duplicates": tally[.duplicate], "refused": tally[.refused]])
        return true
    }

    /// The window of a new run, to `now`: from the last notification received minus `overlap`, as the contract
    /// says, unless the last complete run ended before that (the service was down, or runs are further apart than
    /// `overlap`: notifications missed in between would fall outside), then from that run's end minus `overlap`;
    /// with none received, from the last run's end minus `overlap`; never before 180 days back.
    static func window(lastReceived: Date?, coveredUntil: Date?, now: Date) -> (start: Date, end: Date) {
        let oldest = now.addingTimeInterval(-oldestStart)
        let from: Date? = switch (lastReceived, coveredUntil) {
        case let (received?, covered?): covered < received.addingTimeInterval(-overlap) ? covered : received
        case let (received, covered): received ?? covered
        }
        return (max(oldest, from.map { $0.addingTimeInterval(-overlap) } ?? oldest), now)
    }

    /// What became of one notification of the history.
    enum Taken: String {
        /// Stored now (and applied, or parked, or ignored as the route would).
        case stored
        /// Stored before (received from Apple, or an earlier run): nothing changed.
        case duplicate
        /// Its signed parts do not verify or decode: not stored, as the route would refuse it.
        case refused
    }

    /// One notification through the route's path; a database failure is thrown.
    private static func take(_ item: ServerAPIHistoricNotification, _ intake: NotificationIntake) async throws -> Taken {
        let notification: StoredNotification
        do {
            notification = try await intake.verified(item.notification.jws)
        } catch {
            Log.warning("notification_history_refused", ["notification_uuid": item.notification.payload.notificationUUID,
                                                          "error": String(describing: error)])
            return .refused
        }
        return try await intake.take(notification).stored ? .stored : .duplicate
    }

    /// Releases a run Apple could not finish: due again after the backoff of its attempts, or Apple's
    /// `Retry-After` when later; a refused request (a window or token Apple no longer takes) starts a new window.
    private static func postpone(_ run: NotificationHistoryRun, _ result: ServerAPIResult<ServerAPINotificationHistoryPage>, _ tally: Tally,
                                 _ settings: Settings) async throws -> Bool {
        var until: Date?, restart = false, outcome = "deferred"
        switch result {
        case .retryLater(let when, _, _): until = when
        case .rateLimited(let when, _): until = when
        case .rejected: (restart, outcome) = (true, "rejected")
        case .answered, .notFound, .configurationError, .unverified: outcome = "failed"
        }
        let delay = max(settings.retry.randomDelayMs(attempt: run.attempts), Int(((until?.timeIntervalSinceNow ?? 0) * 1_000).rounded(.up)))
        let detail = String(describing: result)
        guard try await NotificationHistoryStore().postpone(run, by: .milliseconds(delay), restartWindow: restart, error: detail,
                                                            on: settings.intake.db) else { return takenOver(run) }
        Metrics.shared.increment(runsMetric, runsHelp, labels: ["environment": run.environment, "outcome": outcome])
        Log.warning("notification_history_postponed", [
            "environment": run.environment, "outcome": outcome, "detail": detail, "restart_window": restart, "retry_in_ms": delay,
            "pages": tally.pages, "stored": tally[.stored], "duplicates": tally[.duplicate], "refused": tally[.refused],
        ])
        return false
    }

    /// A claim whose lease ran out and was taken by another instance: it carries the run on.
    private static func takenOver(_ run: NotificationHistoryRun) -> Bool {
        Metrics.shared.increment(runsMetric, runsHelp, labels: ["environment": run.environment, "outcome": "taken_over"])
        Log.warning("notification_history_taken_over", ["environment": run.environment])
        return false
    }

    private static let runsMetric = "notification_history_runs_total"
    private static let runsHelp = "Notification history runs ended by this process, by environment and outcome."

    /// A run's pages and notifications so far, for its log line; each notification counted in the metrics.
    private struct Tally {
        var pages = 0
        var taken: [Taken: Int] = [:]

        @Loop mutating func count(_ result: Taken, environment: String) {
            taken[result, default: 0] += 1
            Metrics.shared.increment("notification_history_notifications_total",
                                     "Notifications read from Apple's notification history by this process, by environment and result.",
                                     labels: ["environment": environment, "result": result.rawValue])
        }

        subscript(_ result: Taken) -> Int { taken[result] ?? 0 }
    }
}
