import ServiceRuntime
import EntitlementModel
import Foundation

/// Builders for the usual shapes of receipts. Dates are truncated to whole milliseconds, as Apple sends them,
/// so the transactions a builder returns equal the ones a client decodes from the fake's answer.
extension FakeReceipt {
    /// Adds a one-time purchase (a consumable, a non-consumable or a non-renewing subscription) to `in_app`.
    @discardableResult
    public mutating func addPurchase(
        _ productID: String, transactionID: String, purchased: Date, quantity: Int = 1,
        ownership: Ownership = .purchased, appAccountToken: String? = nil
    ) -> StoreTransaction {
        let transaction = StoreTransaction(
            transactionID: transactionID, originalTransactionID: transactionID, productID: productID,
            purchaseDate: purchased.wholeMilliseconds, originalPurchaseDate: purchased.wholeMilliseconds,
            ownership: ownership, quantity: quantity, appAccountToken: appAccountToken)
        inApp.append(transaction)
        return transaction
    }

    /// Adds an auto-renewable subscription bought at `start` and renewed until it ran `periods` periods of
    /// `period`: one transaction per period in `latest_receipt_info` and `in_app` (the first one's id is
    /// `originalTransactionID`, the renewals' ids append a three-digit counter), and its `pending_renewal_info`
    /// entry saying whether it renews. With `trial`, the first period is a free trial.
    @discardableResult
    public mutating func addSubscription(
        _ productID: String, originalTransactionID: String, group: String = "group.premium", start: Date,
        period: ISODuration, periods: Int = 1, willRenew: Bool = true, trial: Bool = false,
        ownership: Ownership = .purchased, appAccountToken: String? = nil
    ) -> [StoreTransaction] {
        let transactions = Self.periods(
            productID, originalTransactionID: originalTransactionID, firstTransactionID: originalTransactionID,
            originalPurchase: start, group: group, start: start, period: period, count: periods, trial: trial,
            ownership: ownership, appAccountToken: appAccountToken)
        inApp += transactions
        latestReceiptInfo += transactions
        pendingRenewalInfo.removeAll { $0.originalTransactionID == originalTransactionID }
        pendingRenewalInfo.append(RenewalInfo(
            originalTransactionID: originalTransactionID, productID: productID, autoRenewProductID: productID,
            willRenew: willRenew, expirationIntent: willRenew ? nil : 1))
        return transactions
    }

    /// Upgrades the subscription `originalTransactionID` to `productID` at `date`, as Apple records it: the
    /// transaction running at `date` gets `is_upgraded` and `date` as its cancellation date, and the new
    /// product's periods start at `date` under the same original transaction (the first with `transactionID`).
    @discardableResult
    public mutating func upgrade(
        originalTransactionID: String, to productID: String, transactionID: String, at date: Date,
        period: ISODuration, periods: Int = 1
    ) -> [StoreTransaction] {
        let date = date.wholeMilliseconds
        let chain = latestReceiptInfo.filter { $0.originalTransactionID == originalTransactionID }
        guard let running = chain.last(where: { $0.purchaseDate <= date && ($0.expiresDate ?? .distantFuture) > date })
        else { preconditionFailure("no transaction of \(originalTransactionID) runs at \(date)") }
        updateTransaction(running.transactionID) {
            $0.isUpgraded = true
            $0.cancellationDate = date
        }
        let transactions = Self.periods(
            productID, originalTransactionID: originalTransactionID, firstTransactionID: transactionID,
            originalPurchase: chain.first?.originalPurchaseDate ?? running.purchaseDate,
            group: running.subscriptionGroupIdentifier ?? "group.premium", start: date, period: period,
            count: periods, trial: false, ownership: running.ownership, appAccountToken: running.appAccountToken)
        inApp += transactions
        latestReceiptInfo += transactions
        updateRenewal(originalTransactionID: originalTransactionID) {
            $0.productID = productID
            $0.autoRenewProductID = productID
        }
        return transactions
    }

    /// Records a refund (or a revocation) of `transactionID` at `date` in every list that holds it; `reason` is
    /// Apple's `cancellation_reason` (`0` other, `1` a problem with the app).
    public mutating func cancel(transactionID: String, at date: Date, reason: String = "0") {
        updateTransaction(transactionID) {
            $0.cancellationDate = date.wholeMilliseconds
            $0.cancellationReason = reason
        }
    }

    /// The subscription `originalTransactionID` failed to renew on a billing error: Apple keeps retrying
    /// (`is_in_billing_retry_period`, `expiration_intent` 2), and with `gracePeriodEnds` the user keeps
    /// access until then.
    public mutating func enterBillingRetry(originalTransactionID: String, gracePeriodEnds: Date? = nil) {
        updateRenewal(originalTransactionID: originalTransactionID) {
            $0.willRenew = true
            $0.isInBillingRetryPeriod = true
            $0.expirationIntent = 2
            $0.gracePeriodExpiresDate = gracePeriodEnds?.wholeMilliseconds
        }
    }

    /// Changes the `pending_renewal_info` entry of `originalTransactionID`.
    public mutating func updateRenewal(originalTransactionID: String, _ change: (inout RenewalInfo) -> Void) {
        guard let index = pendingRenewalInfo.firstIndex(where: { $0.originalTransactionID == originalTransactionID })
        else { preconditionFailure("no pending renewal entry for \(originalTransactionID)") }
        change(&pendingRenewalInfo[index])
    }

    /// Changes every copy of `transactionID` (in `in_app` and in `latest_receipt_info`).
    public mutating func updateTransaction(_ transactionID: String, _ change: (inout StoreTransaction) -> Void) {
        var found = false
        for index in inApp.indices where inApp[index].transactionID == transactionID {
            change(&inApp[index])
            found = true
        }
        for index in latestReceiptInfo.indices where latestReceiptInfo[index].transactionID == transactionID {
            change(&latestReceiptInfo[index])
            found = true
        }
        precondition(found, "no transaction \(transactionID) in the receipt")
    }

    private static func periods(
        _ productID: String, originalTransactionID: String, firstTransactionID: String, originalPurchase: Date,
        group: String, start: Date, period: ISODuration, count: Int, trial: Bool, ownership: Ownership,
        appAccountToken: String?
    ) -> [StoreTransaction] {
        precondition(count >= 1 && !period.isZero, "a subscription runs at least one non-empty period")
        var transactions: [StoreTransaction] = []
        var begin = start.wholeMilliseconds
        for index in 0..<count {
            let end = period.adding(to: begin).wholeMilliseconds
            let counter = String(index)
            transactions.append(StoreTransaction(
                transactionID: index == 0 ? firstTransactionID
                    : firstTransactionID + String(repeating: "0", count: max(0, 3 - counter.count)) + counter,
                originalTransactionID: originalTransactionID, productID: productID, purchaseDate: begin,
                originalPurchaseDate: originalPurchase.wholeMilliseconds, expiresDate: end,
                isTrialPeriod: trial && index == 0, ownership: ownership,
                subscriptionGroupIdentifier: group, appAccountToken: appAccountToken))
            begin = end
        }
        return transactions
    }
}
