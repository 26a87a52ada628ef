import ServiceRuntime
import EntitlementModel
import Foundation

/// Reads what a user owns: their transactions, renewal state, grants and balances, evaluated by the model's
/// pure `EntitlementEvaluator` at one instant.
@Loop
struct EntitlementReader {
    let db: PostgresPool
    let catalog: CatalogCache

    /// The body of `GET /v1/users/{user_id}/entitlements` at `at`.
    func document(userID: String, at: Date) async throws -> EntitlementsDocument {
        let catalog = try await catalog.current()
        // One snapshot for the four reads (a recording committing in between cannot show half), in one round trip.
        let results = try await db.transaction([
            PostgresStatement("""
             SELECT \(TransactionRows.columns)
               FROM purchase_owners o JOIN app_store_transactions t USING (original_transaction_id)
              WHERE o.user_id = $1
             """, [userID]),
            PostgresStatement("""
             SELECT s.original_transaction_id, s.product_id, s.auto_renew_product_id, s.will_renew, s.expiration_intent,
                    s.in_billing_retry, s.grace_period_expires_date, s.price_consent_status
               FROM purchase_owners o JOIN subscriptions s USING (original_transaction_id)
              WHERE o.user_id = $1
             """, [userID]),
            PostgresStatement("SELECT grant_id::text AS grant_id, user_id, entitlement, created_at, expires_at, revoked_at, reason FROM grants WHERE user_id = $1", [userID]),
            PostgresStatement("SELECT currency, balance FROM consumable_balances WHERE user_id = $1", [userID]),
        ], isolation: .repeatableRead)
        let transactions = try results[0].rows.map(TransactionRows.owned)
        let renewals = try results[1].rows.map { row in
            RenewalInfo(
                originalTransactionID: try row.string("original_transaction_id"),
                productID: try row.string("product_id"),
                autoRenewProductID: try row.optionalString("auto_renew_product_id"),
                willRenew: try row.bool("will_renew"),
                expirationIntent: try row.optionalInt("expiration_intent"),
                isInBillingRetryPeriod: try row.bool("in_billing_retry"),
                gracePeriodExpiresDate: try row.optionalDate("grace_period_expires_date"),
                priceConsentStatus: try row.optionalInt("price_consent_status"))
        }
        let grants = try results[2].rows.map(GrantRows.grant)
        var balances: [String: Int] = [:]
        for row in results[3].rows {
            balances[try row.string("currency")] = try row.int("balance")
        }
        let report = EntitlementEvaluator.evaluate(
            transactions: transactions, renewals: renewals, grants: grants, catalog: catalog, at: at)
        return EntitlementsDocument(userID: userID, report: report, consumables: balances)
    }
}

/// The `grants` table's rows as the model's `Grant`.
enum GrantRows {
    static func grant(_ row: PostgresRow) throws -> Grant {
        Grant(
            id: try row.string("grant_id"), userID: try row.string("user_id"),
            entitlement: try row.string("entitlement"), createdAt: try row.date("created_at"),
            expiresAt: try row.optionalDate("expires_at"), revokedAt: try row.optionalDate("revoked_at"),
            reason: try row.string("reason"))
    }
}
