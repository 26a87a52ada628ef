import ServiceRuntime
import EntitlementModel

/// Applies stored notifications that the request which stored them could not (a database error, a process
/// killed after answering): claims due `received` ones with `FOR UPDATE SKIP LOCKED` (so any number of instances
/// cooperate), oldest signed first, and applies each purchase's in that order; a failed one is due again later,
/// with backoff.
@Loop
enum NotificationWorker {
    static let batchSize = 32

    static func make(recorder: PurchaseRecorder, catalog: CatalogCache, retry: RetrySchedule, lease: Duration, intervalMs: UInt64) -> PeriodicWorker {
        let store = NotificationStore()
        return PeriodicWorker(name: "notifications", intervalMs: intervalMs) {
            let due = try await store.claimDue(limit: batchSize, lease: lease, on: recorder.db)
            guard !due.isEmpty else { return false }
            let purchases = Dictionary(grouping: due) { $0.originalTransactionID ?? $0.uuid }
            let runs = purchases.values.map { notifications in
                Task.onLoop {
                    for notification in notifications {
                        await apply(notification, recorder: recorder, retry: retry, store: store)
                    }
                }
            }
            for run in runs { await run.value }
            return due.count == batchSize
        }
    }

    private static func apply(_ notification: StoredNotification, recorder: PurchaseRecorder,
                              retry: RetrySchedule, store: NotificationStore) async {
        do {
            let applied = try await recorder.applyReceived(notification)
            Log.info("app_store_notification_applied", ["notification_uuid": notification.uuid, "attempts": notification.attempts,
                                                         "owner_known": applied.map { $0.owner != nil }])
        } catch {
            let delay = retry.randomDelayMs(attempt: notification.attempts)
            Log.error("app_store_notification_apply_failed", ["notification_uuid": notification.uuid, "error": String(describing: error),
                                                              "retry_in_ms": delay])
            try? await store.retryLater(notification.uuid, delay: .milliseconds(delay), error: String(describing: error), on: recorder.db)
        }
    }
}
