import ServiceRuntime
import EntitlementModel
import Foundation

/// The `app_store_transactions` table's view of a `StoreTransaction`: JSON rows for batched writes
/// (`jsonb_to_recordset`) and decoding of stored rows.
enum TransactionRows {
    /// The stored columns, selected as `OwnedTransaction` needs them.
    static let columns = """
        t.transaction_id, t.original_transaction_id, t.product_id, t.environment, t.purchase_date,
        t.original_purchase_date, t.expires_date, t.cancellation_date, t.cancellation_reason, t.is_upgraded,
        t.is_trial_period, t.is_in_intro_offer_period, t.ownership, t.quantity, t.web_order_line_item_id,
        t.subscription_group_identifier, t.app_account_token, t.promotional_offer_id
        """

    /// A JSON array with one object per transaction, keyed by column name.
    static func json(_ transactions: [StoreTransaction]) throws -> Data {
        let rows: [[String: String?]] = transactions.map { t in
            [
                "transaction_id": t.transactionID,
                "original_transaction_id": t.originalTransactionID,
                "product_id": t.productID,
                "purchase_date": PostgresTimestamp.format(t.purchaseDate),
                "original_purchase_date": t.originalPurchaseDate.map(PostgresTimestamp.format),
                "expires_date": t.expiresDate.map(PostgresTimestamp.format),
                "cancellation_date": t.cancellationDate.map(PostgresTimestamp.format),
                "cancellation_reason": t.cancellationReason,
                "is_upgraded": String(t.isUpgraded),
                "is_trial_period": String(t.isTrialPeriod),
                "is_in_intro_offer_period": String(t.isInIntroOfferPeriod),
                "ownership": t.ownership.rawValue,
                "quantity": String(t.quantity),
                "web_order_line_item_id": t.webOrderLineItemID,
                "subscription_group_identifier": t.subscriptionGroupIdentifier,
                "app_account_token": t.appAccountToken,
                "promotional_offer_id": t.promotionalOfferID,
                "signed_date": t.signedDate.map(PostgresTimestamp.format),
            ]
        }
        return try JSONEncoder().encode(rows)
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
