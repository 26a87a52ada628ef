import EntitlementModel

/// Where and how events are sent: `WEBHOOK_URL`, its secret, the per-request timeout, the retry rule and how many
/// requests one process keeps in flight.
struct WebhookSettings: Sendable {
    var url: String
    var signer: WebhookSigner
    var timeoutMs: Int
    var retry: WebhookRetryPolicy
    var concurrency: Int
    /// How often an idle dispatcher looks for due events written by other processes (or retries coming due).
    var pollMs: Int = 100

    /// How long a claim keeps an event from other senders: longer than any attempt (the timeout, plus room to
    /// record its outcome). An event whose sender died is sent again once it ends.
    var leaseMs: Int { timeoutMs + max(1_000, timeoutMs / 2) }
}
