import ServiceRuntime
import EntitlementModel
import Foundation

/// Everything the entitlement evaluator needs about one user, read at one instant.
struct UserSnapshot: Sendable {
    var transactions: [OwnedTransaction]
    var renewals: [RenewalInfo]
    var grants: [Grant]
    /// Ledger balances by consumable currency.
    var balances: [String: Int]

    /// What the user holds at `at` under `catalog`.
    func report(catalog: Catalog, at: Date) -> EntitlementReport {
        EntitlementEvaluator.evaluate(transactions: transactions, renewals: renewals, grants: grants, catalog: catalog, at: at)
    }
}

/// The read side of a user's purchases: their transactions and subscriptions (through `purchase_owners`),
/// grants and consumable balances, sent as one pipelined round trip of prepared statements.
@Loop
struct UserSnapshotStore {
    /// One read-only REPEATABLE READ snapshot (a recording committing in between cannot show half); reads
    /// waiting for a connection together share a round trip.
    func snapshot(of userID: String, on pool: PostgresPool) async throws -> UserSnapshot {
        try Self.decode(try await pool.readTransaction(Self.statements(userID), isolation: .repeatableRead))
    }

    /// Read inside the caller's transaction on `connection` (which sees its own uncommitted writes).
    func snapshot(of userID: String, within connection: PostgresConnection) async throws -> UserSnapshot {
        try Self.decode(try await connection.pipeline(Self.statements(userID)))
    }

    private static func statements(_ userID: String) -> [PostgresStatement] {
        [
            PostgresStatement(transactionsSQL, [userID]), PostgresStatement(renewalsSQL, [userID]),
            PostgresStatement(grantsSQL, [userID]), PostgresStatement(balancesSQL, [userID]),
        ]
    }

    // The SQL texts are built once: the connection finds a statement it prepared by its text, and the same
    // string each time is found without building and comparing a copy.
    private static let transactionsSQL = """
        SELECT \(TransactionStore.columns)
          FROM purchase_owners o JOIN app_store_transactions t USING (original_transaction_id)
         WHERE o.user_id = $1
        """
    private static let renewalsSQL = """
        SELECT s.original_transaction_id, s.product_id, s.auto_renew_product_id, s.will_renew, s.expiration_intent,
               s.in_billing_retry, s.grace_period_expires_date, s.price_consent_status
          FROM purchase_owners o JOIN subscriptions s USING (original_transaction_id)
         WHERE o.user_id = $1
        """
    private static let grantsSQL = "SELECT grant_id, user_id, entitlement, created_at, expires_at, revoked_at, reason FROM grants WHERE user_id = $1"
    private static let balancesSQL = "SELECT currency, balance FROM consumable_balances WHERE user_id = $1"

    private static func decode(_ results: [PostgresResult]) throws -> UserSnapshot {
        UserSnapshot(transactions: try TransactionStore.owned(results[0]), renewals: try renewals(results[1]),
                     grants: try GrantStore.grants(results[2]), balances: try balances(results[3]))
    }

    private static func renewals(_ result: PostgresResult) throws -> [RenewalInfo] {
        let originalTransactionID = try result.column("original_transaction_id"), productID = try result.column("product_id"),
            autoRenewProductID = try result.column("auto_renew_product_id"), willRenew = try result.column("will_renew"),
            expirationIntent = try result.column("expiration_intent"), inBillingRetry = try result.column("in_billing_retry"),
            gracePeriodExpiresDate = try result.column("grace_period_expires_date"),
            priceConsentStatus = try result.column("price_consent_status")
        return try result.rows.map { row in
            RenewalInfo(
                originalTransactionID: try row.string(originalTransactionID),
                productID: try row.string(productID),
                autoRenewProductID: try row.optionalString(autoRenewProductID),
                willRenew: try row.bool(willRenew),
                expirationIntent: try row.optionalInt(expirationIntent),
                isInBillingRetryPeriod: try row.bool(inBillingRetry),
                gracePeriodExpiresDate: try row.optionalDate(gracePeriodExpiresDate),
                priceConsentStatus: try row.optionalInt(priceConsentStatus))
        }
    }

    /// Ledger balances by currency.
    private static func balances(_ result: PostgresResult) throws -> [String: Int] {
        let currency = try result.column("currency"), balance = try result.column("balance")
        var balances: [String: Int] = [:]
        for row in result.rows {
            balances[try row.string(currency)] = try row.int(balance)
        }
        return balances
    }
}
