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

    /// Inserts unseen transactions and folds later facts (refund, upgrade, expiry) into known ones; returns how
    /// many were new. `firstVerificationID` is the submission that brought a new one, when a post did.
    ///
    /// A signed statement (a transaction with a `signedDate`: signed transactions, notifications) is Apple's whole
    /// view of the transaction at its signing: unless an even newer one was recorded (`signed_date`), it decides
    /// the expiry and the refund: its `revocationDate`, or none when it was signed after the refund we knew (the
    /// refund was reversed). A receipt states no date: it adds a refund we did not know of, unless a signed
    /// statement made after that refund said otherwise, and extends the expiry but never shortens it (an old
    /// receipt's copy of a transaction may predate an extension). The decision reads the stored row: the caller
    /// holds the purchase's lock (`OwnerStore.lockPurchases`), so it cannot change meanwhile.
    func record(_ transactions: [StoreTransaction], environment: StoreEnvironment, firstVerificationID: UUID?,
                on db: some PostgresQueryable) async throws -> Set<String> {
        guard !transactions.isEmpty else { return [] }
        let rows = try await db.query("""
            INSERT INTO app_store_transactions AS t (
                transaction_id, original_transaction_id, product_id, environment, purchase_date, original_purchase_date,
                expires_date, cancellation_date, cancellation_reason, is_upgraded, is_trial_period,
                is_in_intro_offer_period, ownership, quantity, web_order_line_item_id, subscription_group_identifier,
                app_account_token, promotional_offer_id, first_verification_id, signed_date, revocation_percentage)
            SELECT x.transaction_id, x.original_transaction_id, x.product_id, $19, x.purchase_date, x.original_purchase_date,
                   CASE WHEN d.newer_stored THEN e.expires_date WHEN x.signed_date IS NULL THEN GREATEST(x.expires_date, e.expires_date)
                        ELSE COALESCE(x.expires_date, e.expires_date) END,
                   CASE d.refund WHEN 'incoming' THEN x.cancellation_date WHEN 'stored' THEN e.cancellation_date END,
                   CASE d.refund WHEN 'incoming' THEN x.cancellation_reason WHEN 'stored' THEN e.cancellation_reason END,
                   x.is_upgraded, x.is_trial_period, x.is_in_intro_offer_period, x.ownership, x.quantity, x.web_order_line_item_id,
                   x.subscription_group_identifier, lower(x.app_account_token), x.promotional_offer_id, $20,
                   GREATEST(e.signed_date, x.signed_date),
                   CASE d.refund WHEN 'incoming' THEN x.revocation_percentage WHEN 'stored' THEN e.revocation_percentage END
              FROM unnest($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $21) AS x (
                   transaction_id, original_transaction_id, product_id, purchase_date, original_purchase_date,
                   expires_date, cancellation_date, cancellation_reason, is_upgraded, is_trial_period,
                   is_in_intro_offer_period, ownership, quantity, web_order_line_item_id, subscription_group_identifier,
                   app_account_token, promotional_offer_id, signed_date, revocation_percentage)
              LEFT JOIN app_store_transactions e ON e.transaction_id = x.transaction_id
             CROSS JOIN LATERAL (SELECT COALESCE(x.signed_date IS NOT NULL AND e.signed_date > x.signed_date, false) AS newer_stored) n
             CROSS JOIN LATERAL (SELECT n.newer_stored, CASE
                   WHEN n.newer_stored THEN 'stored'
                   WHEN x.signed_date IS NOT NULL THEN CASE
                        WHEN x.cancellation_date IS NOT NULL THEN 'incoming'
                        WHEN e.cancellation_date IS NOT NULL AND x.signed_date <= e.cancellation_date THEN 'stored'
                        ELSE 'none' END
                   WHEN e.cancellation_date IS NOT NULL THEN 'stored'
                   WHEN x.cancellation_date IS NOT NULL AND (e.signed_date IS NULL OR x.cancellation_date > e.signed_date) THEN 'incoming'
                   ELSE 'none' END AS refund) d
            ON CONFLICT (transaction_id) DO UPDATE SET
                expires_date = EXCLUDED.expires_date,
                cancellation_date = EXCLUDED.cancellation_date,
                cancellation_reason = EXCLUDED.cancellation_reason,
                revocation_percentage = EXCLUDED.revocation_percentage,
                is_upgraded = t.is_upgraded OR EXCLUDED.is_upgraded,
                app_account_token = COALESCE(t.app_account_token, EXCLUDED.app_account_token),
                signed_date = EXCLUDED.signed_date,
                updated_at = now()
            RETURNING t.transaction_id, (xmax = 0) AS inserted
            """, [
                transactions.map(\.transactionID), transactions.map(\.originalTransactionID), transactions.map(\.productID),
                transactions.map(\.purchaseDate), transactions.map(\.originalPurchaseDate), transactions.map(\.expiresDate),
                transactions.map(\.cancellationDate), transactions.map(\.cancellationReason), transactions.map(\.isUpgraded),
                transactions.map(\.isTrialPeriod), transactions.map(\.isInIntroOfferPeriod),
                transactions.map(\.ownership.rawValue), transactions.map(\.quantity),
                transactions.map(\.webOrderLineItemID), transactions.map(\.subscriptionGroupIdentifier),
                transactions.map(\.appAccountToken), transactions.map(\.promotionalOfferID), transactions.map(\.signedDate),
                environment.rawValue, firstVerificationID, transactions.map(\.revocationPercentage),
            ])
        return Set(try rows.rows.filter { try $0.bool("inserted") }.map { try $0.string("transaction_id") })
    }

    /// The transactions of every purchase `userID` owns, newest first.
    func list(ownedBy userID: String, on db: some PostgresQueryable) async throws -> [OwnedTransaction] {
        try Self.owned(try await db.query("""
            SELECT \(Self.columns)
              FROM purchase_owners o JOIN app_store_transactions t USING (original_transaction_id)
             WHERE o.user_id = $1
             ORDER BY t.purchase_date DESC, t.transaction_id DESC
            """, [userID]))
    }

    /// The transactions of `productID` that have an owner, are not refunded and were never credited: consumables
    /// recorded before the catalog made the product one (their credit is due once it does).
    func uncredited(ofProduct productID: String, on db: some PostgresQueryable) async throws -> [OwnedTransaction] {
        try Self.owned(try await db.query("""
            SELECT \(Self.columns)
              FROM app_store_transactions t JOIN purchase_owners o USING (original_transaction_id)
             WHERE t.product_id = $1 AND t.cancellation_date IS NULL
               AND NOT EXISTS (SELECT 1 FROM consumable_ledger l WHERE l.transaction_id = t.transaction_id AND l.kind = 'credit')
            """, [productID]))
    }

    /// Decodes the rows of a result selected with `columns`.
    static func owned(_ result: PostgresResult) throws -> [OwnedTransaction] {
        let decoder = try OwnedDecoder(result)
        return try result.rows.map(decoder.decode)
    }

    /// Decodes rows selected with `columns` one at a time (straight into where they go, with no array in
    /// between), each column looked up once for all rows.
    struct OwnedDecoder {
        private let transactionID, originalTransactionID, productID, environment, purchaseDate, originalPurchaseDate,
            expiresDate, cancellationDate, cancellationReason, isUpgraded, isTrialPeriod, isInIntroOfferPeriod,
            ownership, quantity, webOrderLineItemID, subscriptionGroupIdentifier, appAccountToken,
            promotionalOfferID: PostgresColumn

        init(_ result: PostgresResult) throws {
            transactionID = try result.column("transaction_id")
            originalTransactionID = try result.column("original_transaction_id")
            productID = try result.column("product_id")
            environment = try result.column("environment")
            purchaseDate = try result.column("purchase_date")
            originalPurchaseDate = try result.column("original_purchase_date")
            expiresDate = try result.column("expires_date")
            cancellationDate = try result.column("cancellation_date")
            cancellationReason = try result.column("cancellation_reason")
            isUpgraded = try result.column("is_upgraded")
            isTrialPeriod = try result.column("is_trial_period")
            isInIntroOfferPeriod = try result.column("is_in_intro_offer_period")
            ownership = try result.column("ownership")
            quantity = try result.column("quantity")
            webOrderLineItemID = try result.column("web_order_line_item_id")
            subscriptionGroupIdentifier = try result.column("subscription_group_identifier")
            appAccountToken = try result.column("app_account_token")
            promotionalOfferID = try result.column("promotional_offer_id")
        }

        func decode(_ row: PostgresRow) throws -> OwnedTransaction {
            let transaction = StoreTransaction(
                transactionID: try row.string(transactionID),
                originalTransactionID: try row.string(originalTransactionID),
                productID: try row.string(productID),
                purchaseDate: try row.date(purchaseDate),
                originalPurchaseDate: try row.optionalDate(originalPurchaseDate),
                expiresDate: try row.optionalDate(expiresDate),
                cancellationDate: try row.optionalDate(cancellationDate),
                cancellationReason: try row.optionalString(cancellationReason),
                isUpgraded: try row.bool(isUpgraded),
                isTrialPeriod: try row.bool(isTrialPeriod),
                isInIntroOfferPeriod: try row.bool(isInIntroOfferPeriod),
                ownership: Ownership(rawValue: try row.string(ownership)) ?? .purchased,
                quantity: try row.int(quantity),
                webOrderLineItemID: try row.optionalString(webOrderLineItemID),
                subscriptionGroupIdentifier: try row.optionalString(subscriptionGroupIdentifier),
                appAccountToken: try row.optionalString(appAccountToken),
                promotionalOfferID: try row.optionalString(promotionalOfferID))
            return OwnedTransaction(transaction, environment: StoreEnvironment(rawValue: try row.string(environment)) ?? .production)
        }
    }
}
