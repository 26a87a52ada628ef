import ServiceRuntime
import EntitlementModel
import Foundation

/// Sends pending events to `WEBHOOK_URL` on the loop through the runtime's `HTTPClient`: claims due events with
/// `FOR UPDATE SKIP LOCKED` under a lease (so processes share the work and none sends an event twice at once),
/// keeps at most `concurrency` requests in flight, each bounded by the timeout, so a slow or dead receiver
/// holds only its own slots, never the loop or the API. Every attempt is signed afresh (Standard Webhooks);
/// its outcome goes through the model's `WebhookRetryPolicy`: delivered on 2xx, else retried with backoff until
/// the window closes, then `failed`.
@Loop
final class WebhookDispatcher {
    private let db: PostgresPool
    private let http: HTTPClient
    private let settings: WebhookSettings
    private let store = WebhookDeliveryStore()
    private let timer = LoopTimer()
    private let conninfo: String?
    private var listener: PostgresListener?
    private var inFlight: [UUID: (claim: DeliveryClaim, task: Task<Void, Never>)] = [:]
    private var claiming: Task<Void, Never>?
    /// Set when a wake-up arrives during a claim: claim again as soon as it ends.
    private var claimAgain = false
    /// Outcomes of finished attempts not yet recorded, and the write recording the previous batch.
    private var outcomes: [DeliveryOutcome] = []
    private var recording: Task<Void, Never>?
    private var stopped = false
    /// Whether claims succeed, so that a database outage is logged once, not at every poll.
    private var claimHealth = WorkerHealth()

    /// - Parameter conninfo: the database, for a listener on `webhook_events` (new pending events wake the
    ///   dispatcher at commit); nil to rely on polling alone.
    init(db: PostgresPool, settings: WebhookSettings, conninfo: String?) {
        self.db = db
        self.settings = settings
        self.conninfo = conninfo
        http = HTTPClient(configuration: HTTPClientConfiguration(
            maxConnections: settings.concurrency, maxHostConnections: settings.concurrency,
            connectTimeoutMs: min(3_000, settings.timeoutMs), totalTimeoutMs: settings.timeoutMs, maxResponseBytes: 64 << 10,
            truncatesLongBodies: true))  // any 2xx is delivered, whatever its body; 64 KiB of it kept for the log
    }

    /// Requests in flight in this process.
    var inFlightCount: Int { inFlight.count }

    func start() {
        if let conninfo {
            listener = PostgresListener(PostgresListener.Settings(conninfo: conninfo, channels: ["webhook_events"]),
                                        onNotification: { [weak self] _ in self?.wake() }, onStateChange: { [weak self] _ in self?.wake() })
        }
        listener?.start()
        claimSoon(after: 0)
    }

    /// Claims at once (or right after the claim under way).
    private func wake() {
        if claiming != nil { claimAgain = true } else { claimSoon(after: 0) }
    }

    /// Stops claiming, abandons the requests in flight and gives their events back (due at once, for any process).
    func stop() async {
        stopped = true
        timer.close()
        await listener?.stop()
        await claiming?.value
        let abandoned = inFlight.values.map(\.claim)
        for entry in inFlight.values { entry.task.cancel() }
        for entry in inFlight.values { await entry.task.value }
        while let write = recording { await write.value }
        do {
            try await store.release(abandoned, now: Date(), on: db)
        } catch {
            Log.warning("webhook_release_failed", ["error": String(describing: error)])
        }
        Log.info("worker_stopped", ["worker": "webhooks"])
    }

    private func claimSoon(after milliseconds: Int) {
        guard !stopped, claiming == nil else { return }
        timer.start(after: UInt64(milliseconds)) { [self] in
            guard claiming == nil else { return }
            claiming = Task.onLoop { [self] in
                let full = await claim()
                claiming = nil
                // A full batch may leave more due: look again when slots free up (see `finished`), else after a while.
                if claimAgain || !full {
                    claimSoon(after: claimAgain ? 0 : settings.pollMs)
                    claimAgain = false
                }
            }
        }
    }

    /// Claims as many due events as there are free slots and starts sending them; true when every slot is taken.
    private func claim() async -> Bool {
        let free = settings.concurrency - inFlight.count
        guard free > 0, !stopped else { return true }
        let claims: [DeliveryClaim]
        do {
            claims = try await store.claimDue(limit: free, now: Date(), leaseMs: settings.leaseMs, on: db)
            WorkerHealth.log(claimHealth.runSucceeded(), worker: "webhook-claims")
        } catch {
            // Polled every `pollMs`: an outage is logged when it begins and when it ends, as for the workers.
            Log.debug("worker_run_failed", ["worker": "webhook-claims", "error": String(describing: error)])
            WorkerHealth.log(claimHealth.runFailed(String(describing: error)), worker: "webhook-claims")
            return false
        }
        for claim in claims {
            inFlight[claim.claimID] = (claim, Task.onLoop { [self] in
                await send(claim)
                finished(claim)
            })
        }
        return claims.count == free
    }

    /// Records the outcomes gathered so far in one statement, unless a write is under way (its end records the
    /// next batch): under load, many attempts share one round trip. Until recorded, an event stays claimed; if the
    /// write fails, its lease runs out and the event is sent again (at least once).
    private func recordOutcomes() {
        guard recording == nil, !outcomes.isEmpty else { return }
        let batch = outcomes
        outcomes = []
        recording = Task.onLoop { [self] in
            do {
                try await store.record(batch, on: db)
            } catch {
                Log.warning("webhook_record_failed", ["events": batch.count, "error": String(describing: error)])
            }
            recording = nil
            recordOutcomes()
        }
    }

    private func finished(_ claim: DeliveryClaim) {
        inFlight[claim.claimID] = nil
        // Refill once half the slots are free, so a busy dispatcher claims in batches rather than one by one.
        if inFlight.count <= settings.concurrency / 2 { claimSoon(after: 0) }
    }

    /// One attempt: sign, POST, decide, record.
    private func send(_ claim: DeliveryClaim) async {
        let id = claim.eventID.lowercasedString
        let body = Array(claim.payload.utf8)
        let timestamp = Int(Date().timeIntervalSince1970)
        let outcome: WebhookAttemptOutcome, error: String?
        do {
            let response = try await http.post(url: settings.url, body: body,
                                               headers: settings.signer.headers(id: id, timestamp: timestamp, body: body))
            (outcome, error) = (.response(status: response.status), nil)
        } catch let failure {
            if failure.kind == .cancelled { return }
            (outcome, error) = (.noResponse, "\(failure.kind) (curl \(failure.curlCode))")
        }
        let now = Date()
        let decision = settings.retry.decide(outcome, attempt: claim.attempt, pendingSince: claim.pendingSince, now: now,
                                             jitter: Double.random(in: 0.5...1.0))
        let status: Int? = if case .response(let status) = outcome { status } else { nil }
        outcomes.append(DeliveryOutcome(claim: claim, decision: decision, responseStatus: status, error: error, finishedAt: now))
        recordOutcomes()
        Metrics.shared.increment("webhook_attempts_total", "Webhook attempts made by this process, by what followed.",
                                 labels: ["outcome": decision.label])
        switch decision {
        case .delivered:
            break
        case .retry:
            Log.info("webhook_retry", ["event_id": id, "attempt": claim.attempt, "status": status.map(String.init) ?? "-", "error": error ?? "-"])
        case .failed:
            Log.warning("webhook_failed", ["event_id": id, "attempts": claim.attempt])
        }
    }
}

private extension WebhookDeliveryDecision {
    var label: String {
        switch self {
        case .delivered: "delivered"
        case .retry: "retry"
        case .failed: "failed"
        }
    }
}
