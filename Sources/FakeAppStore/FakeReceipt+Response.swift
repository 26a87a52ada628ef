import ServiceRuntime
import EntitlementModel
import Foundation

/// The verifyReceipt answer for a fake receipt, in the shape Apple's iOS 7+ answers have: strings for
/// numbers, flags and milliseconds, each date also as `yyyy-MM-dd HH:mm:ss Etc/GMT` text.
extension FakeReceipt {
    /// The status-0 body Apple would send for this receipt. `receiptData` comes back as `latest_receipt`;
    /// with `excludeOldTransactions`, `latest_receipt_info` keeps only the newest transaction of each
    /// subscription.
    func verifyReceiptBody(receiptData: String, requestDate: Date, excludeOldTransactions: Bool) -> JSONValue {
        let purchases = (inApp + latestReceiptInfo).map(\.purchaseDate)
        let created = purchases.max() ?? requestDate
        var receipt: [String: JSONValue] = [
            "receipt_type": .string(environment == .production ? "Production" : "ProductionSandbox"),
            "adam_id": 0, "app_item_id": 0, "download_id": 0, "version_external_identifier": 0,
            "bundle_id": .string(bundleID),
            "application_version": .string(applicationVersion),
            "original_application_version": .string(originalApplicationVersion),
            "in_app": .array(inApp.map(Self.entry)),
        ]
        Self.addDate(created, "receipt_creation_date", to: &receipt)
        Self.addDate(requestDate, "request_date", to: &receipt)
        Self.addDate(purchases.min() ?? created, "original_purchase_date", to: &receipt)

        var body: [String: JSONValue] = [
            "status": 0,
            "environment": .string(environment.rawValue),
            "receipt": .object(receipt),
        ]
        if !latestReceiptInfo.isEmpty {
            var latest = latestReceiptInfo
            if excludeOldTransactions {
                let newest = Dictionary(grouping: latest, by: \.originalTransactionID)
                    .compactMapValues { $0.max { $0.purchaseDate < $1.purchaseDate }?.transactionID }
                latest.removeAll { newest[$0.originalTransactionID] != $0.transactionID }
            }
            // Apple lists the newest transaction first.
            body["latest_receipt_info"] = .array(latest.sorted { $0.purchaseDate > $1.purchaseDate }.map(Self.entry))
            body["latest_receipt"] = .string(receiptData)
        }
        if !pendingRenewalInfo.isEmpty {
            body["pending_renewal_info"] = .array(pendingRenewalInfo.map(Self.entry))
        }
        return .object(body)
    }

    private static func entry(_ transaction: StoreTransaction) -> JSONValue {
        var entry: [String: JSONValue] = [
            "quantity": .string(String(transaction.quantity)),
            "product_id": .string(transaction.productID),
            "transaction_id": .string(transaction.transactionID),
            "original_transaction_id": .string(transaction.originalTransactionID),
            "is_trial_period": .string(String(transaction.isTrialPeriod)),
            "in_app_ownership_type": .string(transaction.ownership == .familyShared ? "FAMILY_SHARED" : "PURCHASED"),
        ]
        addDate(transaction.purchaseDate, "purchase_date", to: &entry)
        addDate(transaction.originalPurchaseDate ?? transaction.purchaseDate, "original_purchase_date", to: &entry)
        if let expires = transaction.expiresDate {
            addDate(expires, "expires_date", to: &entry)
            entry["is_in_intro_offer_period"] = .string(String(transaction.isInIntroOfferPeriod))
        }
        if let cancelled = transaction.cancellationDate {
            addDate(cancelled, "cancellation_date", to: &entry)
        }
        addString(transaction.cancellationReason, "cancellation_reason", to: &entry)
        if transaction.isUpgraded { entry["is_upgraded"] = "true" }
        addString(transaction.webOrderLineItemID, "web_order_line_item_id", to: &entry)
        addString(transaction.subscriptionGroupIdentifier, "subscription_group_identifier", to: &entry)
        addString(transaction.appAccountToken, "app_account_token", to: &entry)
        addString(transaction.promotionalOfferID, "promotional_offer_id", to: &entry)
        return .object(entry)
    }

    private static func entry(_ renewal: RenewalInfo) -> JSONValue {
        var entry: [String: JSONValue] = [
            "original_transaction_id": .string(renewal.originalTransactionID),
            "product_id": .string(renewal.productID),
            "auto_renew_product_id": .string(renewal.autoRenewProductID ?? renewal.productID),
            "auto_renew_status": .string(renewal.willRenew ? "1" : "0"),
        ]
        if let intent = renewal.expirationIntent {
            entry["expiration_intent"] = .string(String(intent))
            entry["is_in_billing_retry_period"] = .string(renewal.isInBillingRetryPeriod ? "1" : "0")
        } else if renewal.isInBillingRetryPeriod {
            entry["is_in_billing_retry_period"] = "1"
        }
        if let grace = renewal.gracePeriodExpiresDate {
            addDate(grace, "grace_period_expires_date", to: &entry)
        }
        if let consent = renewal.priceConsentStatus {
            entry["price_consent_status"] = .string(String(consent))
        }
        return .object(entry)
    }

    private static func addString(_ value: String?, _ key: String, to object: inout [String: JSONValue]) {
        if let value { object[key] = .string(value) }
    }

    /// `<key>` as `yyyy-MM-dd HH:mm:ss Etc/GMT` and `<key>_ms` as a string of milliseconds.
    private static func addDate(_ date: Date, _ key: String, to object: inout [String: JSONValue]) {
        object[key] = .string(gmtText(date))
        object[key + "_ms"] = .string(String(date.milliseconds))
    }

    private static func gmtText(_ date: Date) -> String {
        var seconds = time_t(date.milliseconds / 1_000 - (date.milliseconds % 1_000 < 0 ? 1 : 0))
        var parts = tm()
        gmtime_r(&seconds, &parts)
        func pad(_ value: Int32, _ width: Int) -> String {
            let text = String(value)
            return String(repeating: "0", count: max(0, width - text.count)) + text
        }
        return "\(pad(parts.tm_year + 1900, 4))-\(pad(parts.tm_mon + 1, 2))-\(pad(parts.tm_mday, 2)) "
            + "\(pad(parts.tm_hour, 2)):\(pad(parts.tm_min, 2)):\(pad(parts.tm_sec, 2)) Etc/GMT"
    }
}
