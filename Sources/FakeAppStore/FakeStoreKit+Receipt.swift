import EntitlementModel
import Foundation

/// The store's purchases as a verifyReceipt receipt, so that a test can verify the same purchases through
/// the legacy endpoint and as signed transactions.
extension FakeStoreKit {
    /// A fake receipt holding the purchases of `environment` (those made with `appAccountToken` when one is
    /// given): every transaction in `in_app`, the auto-renewable ones also in `latest_receipt_info`, and one
    /// `pending_renewal_info` entry per subscription. An upgraded period is cancelled when the next began, as
    /// verifyReceipt shows it; a refund is a cancellation with the refund's reason.
    func receipt(environment: StoreEnvironment, appAccountToken: String?) -> FakeReceipt {
        var receipt = FakeReceipt(bundleID: settings.bundleID, environment: environment)
        let originals = chains.keys.sorted { (transactions[$0]?.purchaseDate ?? 0, $0) < (transactions[$1]?.purchaseDate ?? 0, $1) }
        for original in originals {
            let chain = chain(original)
            guard let first = chain.first, first.environment == environment,
                  appAccountToken == nil || first.appAccountToken == appAccountToken else { continue }
            for (index, transaction) in chain.enumerated() {
                let upgradedAt = transaction.isUpgraded && index + 1 < chain.count ? chain[index + 1].purchaseDate : nil
                let entry = StoreTransaction(
                    transactionID: transaction.transactionID, originalTransactionID: transaction.originalTransactionID,
                    productID: transaction.productID, purchaseDate: Date(milliseconds: transaction.purchaseDate),
                    originalPurchaseDate: Date(milliseconds: transaction.originalPurchaseDate),
                    expiresDate: transaction.expiresDate.map(Date.init(milliseconds:)),
                    cancellationDate: (transaction.revocationDate ?? upgradedAt).map(Date.init(milliseconds:)),
                    cancellationReason: transaction.revocationReason.map(String.init),
                    isUpgraded: transaction.isUpgraded, ownership: transaction.ownership, quantity: transaction.quantity,
                    webOrderLineItemID: transaction.webOrderLineItemID,
                    subscriptionGroupIdentifier: transaction.subscriptionGroupIdentifier,
                    appAccountToken: transaction.appAccountToken)
                receipt.inApp.append(entry)
                if transaction.type == .autoRenewable { receipt.latestReceiptInfo.append(entry) }
            }
            if let renewal = renewals[original] {
                receipt.pendingRenewalInfo.append(RenewalInfo(
                    originalTransactionID: original, productID: renewal.productID,
                    autoRenewProductID: renewal.autoRenewProductID, willRenew: renewal.autoRenewStatus,
                    expirationIntent: renewal.expirationIntent, isInBillingRetryPeriod: renewal.isInBillingRetryPeriod,
                    gracePeriodExpiresDate: renewal.gracePeriodExpiresDate.map(Date.init(milliseconds:))))
            }
        }
        return receipt
    }
}
