import Foundation

/// What a V2 notification changes, by Apple's `notificationType` (and `subtype`), when it is recorded.
///
/// Every recorded notification records the same way: its signed transaction and its signed renewal info, for
/// the purchase's owner, under the rules of signed statements (a transaction is a fact recorded once, its refund
/// state taken from the newest signed statement; renewal state carries the notification's `signedDate` and older
/// never overwrites newer). The change names what Apple says happened, for the log and the stored notification;
/// only `refundReversed` alters the statement itself (see `stating(_:)`).
public enum NotificationChange: String, Sendable, Hashable, CaseIterable {
    /// SUBSCRIBED (INITIAL_BUY, RESUBSCRIBE), ONE_TIME_CHARGE, OFFER_REDEEMED (any subtype): a purchase.
    case purchase
    /// DID_RENEW (none, BILLING_RECOVERY): a new period's transaction, renewal state.
    case renewal
    /// DID_CHANGE_RENEWAL_STATUS (AUTO_RENEW_ENABLED/DISABLED), DID_CHANGE_RENEWAL_PREF (UPGRADE, DOWNGRADE, none):
    /// renewal state (`will_renew`, the product it renews to).
    case renewalPreference
    /// PRICE_INCREASE (PENDING, ACCEPTED): renewal state (`price_consent_status`).
    case priceIncrease
    /// DID_FAIL_TO_RENEW without subtype (billing retry) or with GRACE_PERIOD (billing retry and a grace period end).
    case billingIssue
    /// GRACE_PERIOD_EXPIRED: renewal state without the grace period (billing retry may go on).
    case gracePeriodExpired
    /// EXPIRED (VOLUNTARY, BILLING_RETRY, PRICE_INCREASE, PRODUCT_NOT_FOR_SALE): renewal state that no longer renews.
    case expiration
    /// REFUND: the transaction with its `revocationDate` (a consumable's credit is debited once).
    case refund
    /// REFUND_DECLINED: nothing changes; the transaction is recorded as the fact it is.
    case refundDeclined
    /// REFUND_REVERSED: the transaction is un-refunded (a consumable's refund debit is credited back once).
    case refundReversed
    /// REVOKE: Family Sharing ended for the transaction (its `revocationDate`).
    case revocation
    /// RENEWAL_EXTENDED, RENEWAL_EXTENSION/FAILURE: the transaction's expiry as extended (or not).
    case renewalExtension
    /// CONSUMPTION_REQUEST: the customer asked for a refund; the transaction is recorded (Apple decides later).
    case consumptionRequest
    /// A type this version does not know: its signed transaction and renewal info are still Apple's statements.
    case other

    /// The transaction as this change states it: a reversal un-refunds it whatever the payload carries.
    public func stating(_ transaction: StoreTransaction) -> StoreTransaction {
        guard self == .refundReversed else { return transaction }
        var reversed = transaction
        reversed.cancellationDate = nil
        reversed.cancellationReason = nil
        return reversed
    }
}

/// Why a notification has nothing to apply; it is stored as `ignored`.
public enum IgnoredNotification: String, Sendable, Hashable {
    /// TEST: Apple's request for a test notification.
    case test
    /// RENEWAL_EXTENSION/SUMMARY (a `summary`, no transaction): the per-subscription RENEWAL_EXTENDED ones carry the change.
    case summary
    /// EXTERNAL_PURCHASE_TOKEN: purchases outside the App Store, which this service does not record.
    case externalPurchase
    /// A notification without a signed transaction or renewal info.
    case nothingSigned
}

/// What the service does with a notification: record what it carries, or ignore it.
public enum NotificationDisposition: Sendable, Hashable {
    case record(NotificationChange)
    case ignore(IgnoredNotification)

    /// The disposition of a notification of `type` and `subtype`; `carriesSignedData` says whether it has a signed
    /// transaction or renewal info (`data`, not a `summary`).
    public static func of(type: String, subtype: String?, carriesSignedData: Bool) -> NotificationDisposition {
        switch type {
        case "TEST": return .ignore(.test)
        case "EXTERNAL_PURCHASE_TOKEN": return .ignore(.externalPurchase)
        case "RENEWAL_EXTENSION" where subtype == "SUMMARY": return .ignore(.summary)
        default: break
        }
        guard carriesSignedData else { return .ignore(.nothingSigned) }
        return .record(change(type: type))
    }

    private static func change(type: String) -> NotificationChange {
        switch type {
        case "SUBSCRIBED", "ONE_TIME_CHARGE", "OFFER_REDEEMED": .purchase
        case "DID_RENEW": .renewal
        case "DID_CHANGE_RENEWAL_STATUS", "DID_CHANGE_RENEWAL_PREF": .renewalPreference
        case "PRICE_INCREASE": .priceIncrease
        case "DID_FAIL_TO_RENEW": .billingIssue
        case "GRACE_PERIOD_EXPIRED": .gracePeriodExpired
        case "EXPIRED": .expiration
        case "REFUND": .refund
        case "REFUND_DECLINED": .refundDeclined
        case "REFUND_REVERSED": .refundReversed
        case "REVOKE": .revocation
        case "RENEWAL_EXTENDED", "RENEWAL_EXTENSION": .renewalExtension
        case "CONSUMPTION_REQUEST": .consumptionRequest
        default: .other
        }
    }
}

extension AppStoreNotificationV2 {
    /// What applying this notification does.
    public var disposition: NotificationDisposition {
        .of(type: notificationType, subtype: subtype,
            carriesSignedData: !isSummary && (signedTransactionInfo != nil || signedRenewalInfo != nil))
    }
}
