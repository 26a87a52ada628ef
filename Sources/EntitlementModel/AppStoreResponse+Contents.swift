import Foundation

/// What a verifyReceipt answer and a V1 notification's `unified_receipt` have in common: the receipt, the
/// transaction lists and the renewal state, with the merging that turns them into domain values.
struct ReceiptContents: Decodable, Sendable, Hashable {
    var environment: StoreEnvironment?
    var receipt: AppStoreResponse.Receipt?
    var latestReceiptInfo: [StoreTransaction]
    var latestExpiredReceiptInfo: [StoreTransaction]
    var latestReceipt: String?
    var pendingRenewal: [PendingRenewalEntry]
    /// iOS 6 answers (and V1 notifications) carry one subscription's renewal state at the top level.
    var topLevelRenewal: RenewalFields

    private enum CodingKeys: String, CodingKey {
        case environment, receipt
        case latestReceiptInfo = "latest_receipt_info"
        case latestExpiredReceiptInfo = "latest_expired_receipt_info"
        case latestReceipt = "latest_receipt"
        case pendingRenewalInfo = "pending_renewal_info"
    }

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        environment = try container.appleEnvironment(.environment)
        receipt = try container.decodeIfPresent(AppStoreResponse.Receipt.self, forKey: .receipt)
        latestReceiptInfo = try container.decodeIfPresent(OneOrMany<ReceiptEntry>.self, forKey: .latestReceiptInfo)?
            .elements.map(\.transaction) ?? []
        latestExpiredReceiptInfo = try container
            .decodeIfPresent(OneOrMany<ReceiptEntry>.self, forKey: .latestExpiredReceiptInfo)?
            .elements.map(\.transaction) ?? []
        latestReceipt = try container.appleString(.latestReceipt)
        pendingRenewal = try container
            .decodeIfPresent(OneOrMany<PendingRenewalEntry>.self, forKey: .pendingRenewalInfo)?.elements ?? []
        topLevelRenewal = try RenewalFields(from: decoder)
    }

    func transactions() -> [StoreTransaction] {
        // Richest lists first, so that on equal detail the latest_receipt_info entry is the one kept.
        let all = latestReceiptInfo + latestExpiredReceiptInfo + (receipt?.inApp ?? [])
            + (receipt?.legacyTransaction.map { [$0] } ?? [])
        var byID: [String: StoreTransaction] = [:]
        for transaction in all {
            byID[transaction.transactionID] = byID[transaction.transactionID]?.merged(with: transaction) ?? transaction
        }
        return byID.values.sorted { $0.wasBought(before: $1) }
    }

    func renewalInfo() -> [RenewalInfo] {
        let transactions = transactions()
        var seen: Set<String> = []
        var result: [RenewalInfo] = []
        for entry in pendingRenewal {
            let namedProduct = entry.productID ?? entry.renewal.autoRenewProductID
            guard let originalTransactionID = entry.originalTransactionID
                    ?? transactions.last(where: { $0.productID == namedProduct })?.originalTransactionID,
                  let productID = namedProduct
                    ?? transactions.last(where: { $0.originalTransactionID == originalTransactionID })?.productID,
                  seen.insert(originalTransactionID).inserted
            else { continue }
            result.append(entry.renewal.renewalInfo(originalTransactionID: originalTransactionID, productID: productID))
        }
        if !topLevelRenewal.isEmpty, let anchor = topLevelRenewalAnchor(in: transactions),
           seen.insert(anchor.originalTransactionID).inserted {
            result.append(
                topLevelRenewal.renewalInfo(originalTransactionID: anchor.originalTransactionID, productID: anchor.productID)
            )
        }
        return result
    }

    /// The subscription the top-level renewal fields speak of: the latest-expiring transaction of the
    /// `auto_renew_product_id` product, or of any product when none matches.
    private func topLevelRenewalAnchor(in transactions: [StoreTransaction]) -> StoreTransaction? {
        let subscriptions = transactions.filter { $0.expiresDate != nil }
        let candidates = subscriptions.contains { $0.productID == topLevelRenewal.autoRenewProductID }
            ? subscriptions.filter { $0.productID == topLevelRenewal.autoRenewProductID }
            : subscriptions
        return candidates.max { ($0.expiresDate ?? .distantPast) < ($1.expiresDate ?? .distantPast) }
    }
}

extension StoreTransaction {
    /// How many optional facts this entry states; the richer of two copies of one transaction is preferred.
    fileprivate var detail: Int {
        let optionals: [Any?] = [
            originalPurchaseDate, expiresDate, cancellationDate, cancellationReason, webOrderLineItemID,
            subscriptionGroupIdentifier, appAccountToken, promotionalOfferID,
        ]
        let flags = [isUpgraded, isTrialPeriod, isInIntroOfferPeriod, ownership == .familyShared]
        return optionals.count { $0 != nil } + flags.count { $0 }
    }

    /// One transaction from two copies: the richer copy (`self` on a tie), with the gaps filled from the other.
    fileprivate func merged(with other: StoreTransaction) -> StoreTransaction {
        let (primary, secondary) = other.detail > detail ? (other, self) : (self, other)
        var merged = primary
        merged.originalPurchaseDate = primary.originalPurchaseDate ?? secondary.originalPurchaseDate
        merged.expiresDate = primary.expiresDate ?? secondary.expiresDate
        merged.cancellationDate = primary.cancellationDate ?? secondary.cancellationDate
        merged.cancellationReason = primary.cancellationReason ?? secondary.cancellationReason
        merged.webOrderLineItemID = primary.webOrderLineItemID ?? secondary.webOrderLineItemID
        merged.subscriptionGroupIdentifier = primary.subscriptionGroupIdentifier ?? secondary.subscriptionGroupIdentifier
        merged.appAccountToken = primary.appAccountToken ?? secondary.appAccountToken
        merged.promotionalOfferID = primary.promotionalOfferID ?? secondary.promotionalOfferID
        merged.isUpgraded = primary.isUpgraded || secondary.isUpgraded
        merged.isTrialPeriod = primary.isTrialPeriod || secondary.isTrialPeriod
        merged.isInIntroOfferPeriod = primary.isInIntroOfferPeriod || secondary.isInIntroOfferPeriod
        if secondary.ownership == .familyShared { merged.ownership = .familyShared }
        return merged
    }
}
