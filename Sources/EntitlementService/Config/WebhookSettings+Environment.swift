import EntitlementModel
import Foundation
import ServiceRuntime

extension WebhookSettings {
    /// `WEBHOOK_URL` with its required `WEBHOOK_SECRET`, `WEBHOOK_TIMEOUT_MS`, and the as-built knobs of the retry
    /// rule and concurrency; nil without `WEBHOOK_URL` (events are recorded, not sent). A secret given without a
    /// URL is still checked. No error quotes the secret.
    init?(_ reader: EnvironmentReader) throws(ConfigurationError) {
        let signer = try reader.string("WEBHOOK_SECRET").map { secret throws(ConfigurationError) in try WebhookSigner(secret: secret) }
        let timeoutMs = try reader.int("WEBHOOK_TIMEOUT_MS", default: 10_000, in: 1...600_000)
        let baseMs = try reader.int("WEBHOOK_RETRY_BASE_MS", default: 5_000, in: 1...86_400_000)
        let maxMs = try reader.int("WEBHOOK_RETRY_MAX_MS", default: 3_600_000, in: 1...86_400_000)
        guard maxMs >= baseMs else {
            throw ConfigurationError(variable: "WEBHOOK_RETRY_MAX_MS", problem: "must be at least WEBHOOK_RETRY_BASE_MS (\(baseMs))")
        }
        let windowS = try reader.int("WEBHOOK_RETRY_WINDOW_S", default: 3 * 86_400, in: 1...365 * 86_400)
        let concurrency = try reader.int("WEBHOOK_CONCURRENCY", default: 32, in: 1...1_024)
        guard reader.string("WEBHOOK_URL") != nil else { return nil }
        let url = try reader.url("WEBHOOK_URL", default: "")
        guard let signer else {
            throw ConfigurationError(variable: "WEBHOOK_SECRET", problem: "is required with WEBHOOK_URL (whsec_ and the base64 of 24 to 64 bytes)")
        }
        self.init(url: url, signer: signer, timeoutMs: timeoutMs,
                  retry: WebhookRetryPolicy(schedule: RetrySchedule(baseMs: baseMs, maxMs: maxMs), window: TimeInterval(windowS)),
                  concurrency: concurrency)
    }
}
