import EntitlementModel
import Foundation

/// `POST /v1/admin/receipts/inspect`: what a receipt says about itself, read locally and not verified (only
/// Apple can say it is genuine), with each purchase's owner in this service.
struct ReceiptInspectionBody: Encodable {
    var receipt: LocalReceipt
    /// Whether the receipt's bundle is `APPLE_BUNDLE_ID`; nil when none is configured.
    var forThisApp: Bool?
    /// Owners by original transaction id (`AppReceipt.Purchase.originalOrOwnTransactionID`).
    var owners: [String: String]

    enum CodingKeys: String, CodingKey {
        case format, bundleID = "bundle_id", forThisApp = "for_this_app", environment
        case applicationVersion = "application_version", originalApplicationVersion = "original_application_version"
        case createdAt = "created_at", expiresAt = "expires_at", purchases
    }

    /// Every member written, null where the receipt has no value (a transaction receipt has no dates of its own).
    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        let app: AppReceipt?
        switch receipt {
        case .app(let receipt):
            app = receipt
            try container.encode("app_receipt", forKey: .format)
            try container.encode(receipt.applicationVersion, forKey: .applicationVersion)
        case .transaction(let receipt):
            app = nil
            try container.encode("transaction_receipt", forKey: .format)
            try container.encode(receipt.bundleVersion, forKey: .applicationVersion)
        }
        try container.encode(receipt.bundleID, forKey: .bundleID)
        try container.encode(forThisApp, forKey: .forThisApp)
        try container.encode(receipt.environment, forKey: .environment)
        try container.encode(app?.originalApplicationVersion, forKey: .originalApplicationVersion)
        try container.encode(app?.creationDate, forKey: .createdAt)
        try container.encode(app?.expirationDate, forKey: .expiresAt)
        try container.encode(receipt.purchases.map { PurchaseBody(purchase: $0, owner: owners[$0.originalOrOwnTransactionID]) },
                             forKey: .purchases)
    }

    /// The original transaction ids whose owners the body shows.
    static func originalTransactionIDs(of receipt: LocalReceipt) -> [String] {
        Array(Set(receipt.purchases.map(\.originalOrOwnTransactionID)))
    }

    /// One purchase of the receipt, in the field names of `GET /v1/users/{user_id}/transactions`, with its owner.
    struct PurchaseBody: Encodable {
        var purchase: AppReceipt.Purchase
        /// The user who owns the purchase here; nil when no one does.
        var owner: String?

        enum CodingKeys: String, CodingKey {
            case productID = "product_id", transactionID = "transaction_id", originalTransactionID = "original_transaction_id"
            case quantity, purchaseDate = "purchase_date", originalPurchaseDate = "original_purchase_date"
            case expiresDate = "expires_date", cancellationDate = "cancellation_date", webOrderLineItemID = "web_order_line_item_id"
            case isTrialPeriod = "is_trial_period", isInIntroOfferPeriod = "is_in_intro_offer_period"
            case promotionalOfferID = "promotional_offer_id", userID = "user_id"
        }

        /// Every member written, null when the receipt has no value for it.
        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(purchase.productID, forKey: .productID)
            try container.encode(purchase.transactionID, forKey: .transactionID)
            try container.encode(purchase.originalTransactionID, forKey: .originalTransactionID)
            try container.encode(purchase.quantity, forKey: .quantity)
            try container.encode(purchase.purchaseDate, forKey: .purchaseDate)
            try container.encode(purchase.originalPurchaseDate, forKey: .originalPurchaseDate)
            try container.encode(purchase.expiresDate, forKey: .expiresDate)
            try container.encode(purchase.cancellationDate, forKey: .cancellationDate)
            try container.encode(purchase.webOrderLineItemID, forKey: .webOrderLineItemID)
            try container.encode(purchase.isTrialPeriod, forKey: .isTrialPeriod)
            try container.encode(purchase.isInIntroOfferPeriod, forKey: .isInIntroOfferPeriod)
            try container.encode(purchase.promotionalOfferID, forKey: .promotionalOfferID)
            try container.encode(owner, forKey: .userID)
        }
    }
}
