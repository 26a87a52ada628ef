import ServiceRuntime
import EntitlementModel
import Foundation

/// The `app_store_transactions` table: each App Store transaction once, whoever posted it and however often.
@Loop
struct TransactionStore {
    /// The stored columns (table alias `t`), as `owned(_:)` decodes them; the user snapshot reads them too.
    static let columns = """
        t.transaction_id, t.original_transaction_id, t.product_id, t.environment, t.purchase_date,
        t.original_purchase_date, t.expires_date, t.cancellation_date, t.cancellation_reason, t.is_upgraded,
        t.is_trial_period, t.is_in_intro_offer_period, t.ownership, t.quantity, t.web_order_line_item_id,
        t.subscription_group_identifier, t.app_account_token, t.promotional_offer_id
        """

    /// Inserts unseen transactions and folds later facts (refund, upgrade, expiry) into known ones; returns the
    /// ids of the new ones. `firstVerificationID` is the submission that brought a new one, when a post did.
    func record(_ transactions: [StoreTransaction], environment: StoreEnvironment, firstVerificationID: UUID?,
                on db: some PostgresQueryable) async throws -> Set<String> {
        guard !transactions.isEmpty else { return [] }
        let rows = try await db.query("""
            INSERT INTO app_store_transactions AS t (
                transaction_id, original_transaction_id, product_id, environment, purchase_date, original_purchase_date,
                expires_date, cancellation_date, cancellation_reason, is_upgraded, is_trial_period,
                is_in_intro_offer_period, ownership, quantity, web_order_line_item_id, subscription_group_identifier,
                app_account_token, promotional_offer_id, first_verification_id)
            SELECT x.transaction_id, x.original_transaction_id, x.product_id, $18, x.purchase_date, x.original_purchase_date,
                   x.expires_date, x.cancellation_date, x.cancellation_reason, x.is_upgraded, x.is_trial_period,
                   x.is_in_intro_offer_period, x.ownership, x.quantity, x.web_order_line_item_id,
                   x.subscription_group_identifier, lower(x.app_account_token), x.promotional_offer_id, $19
              FROM unnest($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17) AS x (
                   transaction_id, original_transaction_id, product_id, purchase_date, original_purchase_date,
                   expires_date, cancellation_date, cancellation_reason, is_upgraded, is_trial_period,
                   is_in_intro_offer_period, ownership, quantity, web_order_line_item_id, subscription_group_identifier,
                   app_account_token, promotional_offer_id)
            ON CONFLICT (transaction_id) DO UPDATE SET
                expires_date = COALESCE(EXCLUDED.expires_date, t.expires_date),
                cancellation_date = COALESCE(t.cancellation_date, EXCLUDED.cancellation_date),
                cancellation_reason = COALESCE(t.cancellation_reason, EXCLUDED.cancellation_reason),
                is_upgraded = t.is_upgraded OR EXCLUDED.is_upgraded,
                app_account_token = COALESCE(t.app_account_token, EXCLUDED.app_account_token),
                updated_at = now()
            RETURNING t.transaction_id, (xmax = 0) AS inserted
            """, [
                transactions.map(\.transactionID), transactions.map(\.originalTransactionID), transactions.map(\.productID),
                transactions.map(\.purchaseDate), transactions.map(\.originalPurchaseDate), transactions.map(\.expiresDate),
                transactions.map(\.cancellationDate), transactions.map(\.cancellationReason), transactions.map(\.isUpgraded),
                transactions.map(\.isTrialPeriod), transactions.map(\.isInIntroOfferPeriod),
                transactions.map(\.ownership.rawValue), transactions.map(\.quantity),
                transactions.map(\.webOrderLineItemID), transactions.map(\.subscriptionGroupIdentifier),
                transactions.map(\.appAccountToken), transactions.map(\.promotionalOfferID),
                environment.rawValue, firstVerificationID,
            ])
        return Set(try rows.rows.filter { try $0.bool("inserted") }.map { try $0.string("transaction_id") })
    }

    /// The transactions of every purchase `userID` owns, newest first.
    func list(ownedBy userID: String, on db: some PostgresQueryable) async throws -> [OwnedTransaction] {
        try await db.query("""
            SELECT \(Self.columns)
              FROM purchase_owners o JOIN app_store_transactions t USING (original_transaction_id)
             WHERE o.user_id = $1
             ORDER BY t.purchase_date DESC, t.transaction_id DESC
            """, [userID]).rows.map(Self.owned)
    }

    /// Decodes a row selected with `columns`.
    static func owned(_ row: PostgresRow) throws -> OwnedTransaction {
        let transaction = StoreTransaction(
            transactionID: try row.string("transaction_id"),
            originalTransactionID: try row.string("original_transaction_id"),
            productID: try row.string("product_id"),
            purchaseDate: try row.date("purchase_date"),
            originalPurchaseDate: try row.optionalDate("original_purchase_date"),
            expiresDate: try row.optionalDate("expires_date"),
            cancellationDate: try row.optionalDate("cancellation_date"),
            cancellationReason: try row.optionalString("cancellation_reason"),
            isUpgraded: try row.bool("is_upgraded"),
            isTrialPeriod: try row.bool("is_trial_period"),
            isInIntroOfferPeriod: try row.bool("is_in_intro_offer_period"),
            ownership: Ownership(rawValue: try row.string("ownership")) ?? .purchased,
            quantity: try row.int("quantity"),
            webOrderLineItemID: try row.optionalString("web_order_line_item_id"),
            subscriptionGroupIdentifier: try row.optionalString("subscription_group_identifier"),
            appAccountToken: try row.optionalString("app_account_token"),
            promotionalOfferID: try row.optionalString("promotional_offer_id"))
        let environment = StoreEnvironment(rawValue: try row.string("environment")) ?? .production
        return OwnedTransaction(transaction, environment: environment)
    }
}
