import ServiceRuntime
import EntitlementModel
import Foundation

/// The 200 answer to `POST /v1/receipts`: the user's entitlements plus the verification's own fields.
struct VerifiedReceiptBody: Encodable {
    var document: EntitlementsDocument
    var verificationID: String
    var environment: StoreEnvironment
    /// The previous owner when the purchase moved to this user (`RESTORE_POLICY=transfer`).
    var transferredFrom: String?

    enum CodingKeys: String, CodingKey {
        case verificationID = "verification_id", status, environment, transferredFrom = "transferred_from"
    }

    func encode(to encoder: any Encoder) throws {
        try document.encode(to: encoder)
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(verificationID, forKey: .verificationID)
        try container.encode(SubmissionStatus.verified.rawValue, forKey: .status)
        try container.encode(environment.rawValue, forKey: .environment)
        try container.encodeIfPresent(transferredFrom, forKey: .transferredFrom)
    }
}

/// `GET /v1/receipts/{verification_id}`.
struct SubmissionBody: Encodable {
    var verificationID: String
    var userID: String
    var status: String
    var appleStatus: Int?
    var environment: String?
    var attempts: Int
    var orderID: String?
    var createdAt: Date
    var updatedAt: Date

    init(_ submission: Submission) {
        verificationID = submission.verificationID.lowercasedString
        userID = submission.userID
        status = submission.status.rawValue
        appleStatus = submission.appleStatus
        environment = submission.environment?.rawValue
        attempts = submission.attempts
        orderID = submission.orderID?.lowercasedString
        createdAt = submission.createdAt
        updatedAt = submission.updatedAt
    }

    enum CodingKeys: String, CodingKey {
        case verificationID = "verification_id", userID = "user_id", status, appleStatus = "apple_status"
        case environment, attempts, orderID = "order_id", createdAt = "created_at", updatedAt = "updated_at"
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(verificationID, forKey: .verificationID)
        try container.encode(userID, forKey: .userID)
        try container.encode(status, forKey: .status)
        try container.encode(appleStatus, forKey: .appleStatus)
        try container.encode(environment, forKey: .environment)
        try container.encode(attempts, forKey: .attempts)
        try container.encodeIfPresent(orderID, forKey: .orderID)
        try container.encode(createdAt, forKey: .createdAt)
        try container.encode(updatedAt, forKey: .updatedAt)
    }
}

/// One App Store transaction in `GET /v1/users/{user_id}/transactions`.
struct TransactionBody: Encodable {
    var owned: OwnedTransaction

    init(_ owned: OwnedTransaction) { self.owned = owned }

    enum CodingKeys: String, CodingKey {
        case transactionID = "transaction_id", originalTransactionID = "original_transaction_id", productID = "product_id"
        case environment, purchaseDate = "purchase_date", originalPurchaseDate = "original_purchase_date", expiresDate = "expires_date"
        case cancellationDate = "cancellation_date", cancellationReason = "cancellation_reason"
        case isUpgraded = "is_upgraded", isTrialPeriod = "is_trial_period", isInIntroOfferPeriod = "is_in_intro_offer_period"
        case ownership, quantity, webOrderLineItemID = "web_order_line_item_id"
        case subscriptionGroupIdentifier = "subscription_group_identifier", appAccountToken = "app_account_token"
    }

    func encode(to encoder: any Encoder) throws {
        let t = owned.transaction
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(t.transactionID, forKey: .transactionID)
        try container.encode(t.originalTransactionID, forKey: .originalTransactionID)
        try container.encode(t.productID, forKey: .productID)
        try container.encode(owned.environment.rawValue, forKey: .environment)
        try container.encode(t.purchaseDate, forKey: .purchaseDate)
        try container.encode(t.originalPurchaseDate, forKey: .originalPurchaseDate)
        try container.encode(t.expiresDate, forKey: .expiresDate)
        try container.encode(t.cancellationDate, forKey: .cancellationDate)
        try container.encode(t.cancellationReason, forKey: .cancellationReason)
        try container.encode(t.isUpgraded, forKey: .isUpgraded)
        try container.encode(t.isTrialPeriod, forKey: .isTrialPeriod)
        try container.encode(t.isInIntroOfferPeriod, forKey: .isInIntroOfferPeriod)
        try container.encode(t.ownership.rawValue, forKey: .ownership)
        try container.encode(t.quantity, forKey: .quantity)
        try container.encode(t.webOrderLineItemID, forKey: .webOrderLineItemID)
        try container.encode(t.subscriptionGroupIdentifier, forKey: .subscriptionGroupIdentifier)
        try container.encodeIfPresent(t.appAccountToken, forKey: .appAccountToken)
    }
}

/// `GET /v1/users/{user_id}/transactions`, newest first.
struct TransactionListBody: Encodable {
    var userID: String
    var transactions: [TransactionBody]
    enum CodingKeys: String, CodingKey { case userID = "user_id", transactions }
}

/// The answer to a consume: the balance after it.
struct ConsumeResult: Encodable {
    var userID: String
    var currency: String
    var balance: Int
    enum CodingKeys: String, CodingKey { case userID = "user_id", currency, balance }
}
