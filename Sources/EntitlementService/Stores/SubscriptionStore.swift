import ServiceRuntime
import EntitlementModel
import Foundation

/// One auto-renewable subscription as a receipt or notification shows it: its latest transaction, when the
/// refresher should look again, and Apple's renewal info when it came along.
struct SubscriptionState: Sendable {
    var originalTransactionID: String
    var productID: String
    var latestExpiresDate: Date?
    var nextRefreshAt: Date?
    var renewal: RenewalInfo?
    /// Stated by a signed transaction alone (no renewal info, no receipt) while in its period: a subscription first
    /// seen this way starts as renewing, as Apple starts every one, until Apple's renewal state arrives (which
    /// then changes nothing unless the user turned renewal off). A subscription already known keeps its state,
    /// unless only such assumptions made it and this states a later period.
    var assumedRenewing = false
    /// Stated without renewal state (a signed transaction alone), so due for Apple's status at once: unless Apple's
    /// renewal state is stored already and this states no later period, when the stored schedule stands (a client
    /// posting its current entitlements at every launch must not make every launch a call to Apple).
    var wantsStatus = false
}

/// A subscription the renewal refresher claimed: the receipt to re-verify (none when it was recorded
/// without one) and for whom.
struct DueRefresh: Sendable {
    var originalTransactionID: String
    var latestReceipt: String?
    var environment: StoreEnvironment
    /// Refreshes so far, this one included (the retry backoff grows with it).
    var attempts: Int
    /// The purchase's owner; nil when nobody owns it (nothing is recorded then).
    var owner: String?
}

/// The `subscriptions` table: the renewal state of each auto-renewable subscription, and the renewal
/// refresher's claims on those due for re-verification.
@Loop
struct SubscriptionStore {
    /// Folds `states` into the stored subscriptions: the later expiry wins, the receipt replaces the stored one
    /// when it has one, and Apple's renewal info, where it came along, replaces what was known unless that is
    /// newer: renewal state carries the `signedDate` of its payload (`renewal_signed_date`; receipts and refreshes
    /// count as now). Rows are written in id order, as the owners are.
    func record(_ states: [SubscriptionState], latestReceipt: String?, environment: StoreEnvironment,
                on db: some PostgresQueryable) async throws {
        guard !states.isEmpty else { return }
        let sorted = states.sorted { $0.originalTransactionID < $1.originalTransactionID }
        _ = try await db.query("""
            WITH x AS (
                SELECT * FROM unnest($1, $2, $3, $4, $7, $8)
                    AS x (original_transaction_id, product_id, latest_expires_date, next_refresh_at, will_renew, wants_status))
            INSERT INTO subscriptions AS s (original_transaction_id, product_id, latest_expires_date, latest_receipt, environment, next_refresh_at,
                                            will_renew)
            SELECT x.original_transaction_id, x.product_id, x.latest_expires_date, $5, $6, x.next_refresh_at, x.will_renew FROM x
            ON CONFLICT (original_transaction_id) DO UPDATE SET
                product_id = CASE WHEN s.latest_expires_date IS NULL OR EXCLUDED.latest_expires_date >= s.latest_expires_date
                                  THEN EXCLUDED.product_id ELSE s.product_id END,
                latest_expires_date = GREATEST(s.latest_expires_date, EXCLUDED.latest_expires_date),
                latest_receipt = COALESCE(EXCLUDED.latest_receipt, s.latest_receipt),
                environment = EXCLUDED.environment,
                will_renew = CASE WHEN s.renewal_signed_date IS NULL AND EXCLUDED.latest_expires_date > s.latest_expires_date
                                  THEN EXCLUDED.will_renew ELSE s.will_renew END,
                (next_refresh_at, refresh_attempts) = (
                    SELECT CASE WHEN kept THEN s.next_refresh_at ELSE EXCLUDED.next_refresh_at END, CASE WHEN kept THEN s.refresh_attempts ELSE 0 END
                      FROM (SELECT x.wants_status AND s.renewal_signed_date IS NOT NULL
                                   AND EXCLUDED.latest_expires_date <= s.latest_expires_date AS kept
                              FROM x WHERE x.original_transaction_id = EXCLUDED.original_transaction_id) k),
                updated_at = now()
            """, [sorted.map(\.originalTransactionID), sorted.map(\.productID), sorted.map(\.latestExpiresDate),
                  sorted.map(\.nextRefreshAt), latestReceipt, environment.rawValue, sorted.map(\.assumedRenewing),
                  sorted.map(\.wantsStatus)])
        let renewed = sorted.compactMap(\.renewal)
        guard !renewed.isEmpty else { return }
        _ = try await db.query("""
            UPDATE subscriptions s SET
                auto_renew_product_id = x.auto_renew_product_id, will_renew = x.will_renew,
                expiration_intent = x.expiration_intent, in_billing_retry = x.in_billing_retry,
                grace_period_expires_date = x.grace_period_expires_date, price_consent_status = x.price_consent_status,
                renewal_signed_date = COALESCE(x.signed_date, now())
              FROM unnest($1, $2, $3, $4, $5, $6, $7, $8) AS x (
                   original_transaction_id, auto_renew_product_id, will_renew, expiration_intent, in_billing_retry,
                   grace_period_expires_date, price_consent_status, signed_date)
             WHERE s.original_transaction_id = x.original_transaction_id
               AND (s.renewal_signed_date IS NULL OR COALESCE(x.signed_date, now()) >= s.renewal_signed_date)
            """, [renewed.map(\.originalTransactionID), renewed.map(\.autoRenewProductID), renewed.map(\.willRenew),
                  renewed.map(\.expirationIntent), renewed.map(\.isInBillingRetryPeriod), renewed.map(\.gracePeriodExpiresDate),
                  renewed.map(\.priceConsentStatus), renewed.map(\.signedDate)])
    }

    /// Claims up to `limit` subscriptions whose refresh is due, skipping rows other instances hold; a claimed
    /// one is not due again before `lease` has passed. Without `withoutReceipt` only those with a receipt to
    /// re-verify are claimed.
    func claimDue(limit: Int, lease: Duration, withoutReceipt: Bool = false, on db: some PostgresQueryable) async throws -> [DueRefresh] {
        try await db.query("""
            WITH due AS (
                SELECT original_transaction_id FROM subscriptions
                 WHERE next_refresh_at <= now() AND ($3 OR latest_receipt IS NOT NULL)
                 ORDER BY next_refresh_at LIMIT $1
                 FOR UPDATE SKIP LOCKED)
            UPDATE subscriptions s
               SET next_refresh_at = now() + $2, refresh_attempts = s.refresh_attempts + 1
              FROM due WHERE s.original_transaction_id = due.original_transaction_id
            RETURNING s.original_transaction_id, s.latest_receipt, s.environment, s.refresh_attempts,
                      (SELECT user_id FROM purchase_owners o WHERE o.original_transaction_id = s.original_transaction_id) AS owner
            """, [limit, lease, withoutReceipt]).rows.map { row in
                DueRefresh(
                    originalTransactionID: try row.string("original_transaction_id"), latestReceipt: try row.optionalString("latest_receipt"),
                    environment: StoreEnvironment(rawValue: try row.string("environment")) ?? .production,
                    attempts: try row.int("refresh_attempts"), owner: try row.optionalString("owner"))
            }
    }

    /// No more refreshes: Apple rejected the receipt for good.
    func stopRefreshing(_ originalTransactionID: String, on db: some PostgresQueryable) async throws {
        _ = try await db.query("UPDATE subscriptions SET next_refresh_at = NULL WHERE original_transaction_id = $1", [originalTransactionID])
    }

    /// The next refresh after `delay`: Apple could not answer this time.
    func deferRefresh(_ originalTransactionID: String, by delay: Duration, on db: some PostgresQueryable) async throws {
        _ = try await db.query("UPDATE subscriptions SET next_refresh_at = now() + $2 WHERE original_transaction_id = $1",
                               [originalTransactionID, delay])
    }
}
