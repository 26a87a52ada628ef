import EntitlementModel
import Foundation

/// `POST /v1/admin/receipts/inspect`: what a receipt says about itself, read locally and not verified (only
/// Apple can say it is genuine), with each purchase's owner in this service.
struct ReceiptInspectionBody: Encodable {
    var receipt: LocalReceipt
    /// Whether the receipt's bundle is `APPLE_BUNDLE_ID`; nil when none is configured.
    var forThisApp: Bool?
    /// Owners by original transaction id (a purchase without one is its own original).
    var owners: [String: String]

    enum CodingKeys: String, CodingKey {
        case format, bundleID = "bundle_id", forThisApp = "for_this_app", environment
        case applicationVersion = "application_version", originalApplicationVersion = "original_application_version"
        case createdAt = "created_at", expiresAt = "expires_at", purchases
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(receipt.bundleID, forKey: .bundleID)
        try container.encode(forThisApp, forKey: .forThisApp)
        try container.encode(receipt.environment, forKey: .environment)
        switch receipt {
        case .app(let app):
            try container.encode("app_receipt", forKey: .format)
            try container.encode(app.applicationVersion, forKey: .applicationVersion)
            try container.encode(app.originalApplicationVersion, forKey: .originalApplicationVersion)
            try container.encode(app.creationDate, forKey: .createdAt)
            try container.encode(app.expirationDate, forKey: .expiresAt)
            try container.encode(app.inApp.map { PurchaseBody($0, owner: owners[$0.originalTransactionID ?? $0.transactionID]) },
                                 forKey: .purchases)
        case .transaction(let transaction):
            try container.encode("transaction_receipt", forKey: .format)
            try container.encode(transaction.bundleVersion, forKey: .applicationVersion)
            try container.encodeNil(forKey: .originalApplicationVersion)
            try container.encodeNil(forKey: .createdAt)
            try container.encodeNil(forKey: .expiresAt)
            try container.encode([PurchaseBody(transaction, owner: owners[transaction.originalTransactionID ?? transaction.transactionID])],
                                 forKey: .purchases)
        }
    }

    /// The original transaction ids whose owners the body shows.
    static func originalTransactionIDs(of receipt: LocalReceipt) -> [String] {
        switch receipt {
        case .app(let app): Array(Set(app.inApp.map { $0.originalTransactionID ?? $0.transactionID }))
        case .transaction(let transaction): [transaction.originalTransactionID ?? transaction.transactionID]
        }
    }

    /// One purchase of the receipt, in the field names of `GET /v1/users/{user_id}/transactions`.
    struct PurchaseBody: Encodable {
        var productID: String
        var transactionID: String
        var originalTransactionID: String?
        var quantity: Int?
        var purchaseDate: Date?
        var originalPurchaseDate: Date?
        var expiresDate: Date?
        var cancellationDate: Date?
        var webOrderLineItemID: Int?
        var isTrialPeriod: Bool?
        var isInIntroOfferPeriod: Bool?
        var promotionalOfferID: String?
        /// The user who owns the purchase here; nil when no one does.
        var userID: String?

        enum CodingKeys: String, CodingKey {
            case productID = "product_id", transactionID = "transaction_id", originalTransactionID = "original_transaction_id"
            case quantity, purchaseDate = "purchase_date", originalPurchaseDate = "original_purchase_date"
            case expiresDate = "expires_date", cancellationDate = "cancellation_date", webOrderLineItemID = "web_order_line_item_id"
            case isTrialPeriod = "is_trial_period", isInIntroOfferPeriod = "is_in_intro_offer_period"
            case promotionalOfferID = "promotional_offer_id", userID = "user_id"
        }

        init(_ purchase: AppReceipt.Purchase, owner: String?) {
            productID = purchase.productID
            transactionID = purchase.transactionID
            originalTransactionID = purchase.originalTransactionID
            quantity = purchase.quantity
            purchaseDate = purchase.purchaseDate
            originalPurchaseDate = purchase.originalPurchaseDate
            expiresDate = purchase.expiresDate
            cancellationDate = purchase.cancellationDate
            webOrderLineItemID = purchase.webOrderLineItemID
            isTrialPeriod = purchase.isTrialPeriod
            isInIntroOfferPeriod = purchase.isInIntroOfferPeriod
            promotionalOfferID = purchase.promotionalOfferID
            userID = owner
        }

        init(_ transaction: TransactionReceipt, owner: String?) {
            productID = transaction.productID
            transactionID = transaction.transactionID
            originalTransactionID = transaction.originalTransactionID
            quantity = transaction.quantity
            purchaseDate = transaction.purchaseDate
            originalPurchaseDate = transaction.originalPurchaseDate
            userID = owner
        }

        /// Every member written, null when the receipt has no value for it.
        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(productID, forKey: .productID)
            try container.encode(transactionID, forKey: .transactionID)
            try container.encode(originalTransactionID, forKey: .originalTransactionID)
            try container.encode(quantity, forKey: .quantity)
            try container.encode(purchaseDate, forKey: .purchaseDate)
            try container.encode(originalPurchaseDate, forKey: .originalPurchaseDate)
            try container.encode(expiresDate, forKey: .expiresDate)
            try container.encode(cancellationDate, forKey: .cancellationDate)
            try container.encode(webOrderLineItemID, forKey: .webOrderLineItemID)
            try container.encode(isTrialPeriod, forKey: .isTrialPeriod)
            try container.encode(isInIntroOfferPeriod, forKey: .isInIntroOfferPeriod)
            try container.encode(promotionalOfferID, forKey: .promotionalOfferID)
            try container.encode(userID, forKey: .userID)
        }
    }
}
