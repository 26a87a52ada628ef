import ServiceRuntime
import EntitlementModel

/// The store's purchases as Apple's signed payloads: `JWSTransactionDecodedPayload`,
/// `JWSRenewalInfoDecodedPayload` and `responseBodyV2DecodedPayload`, with Apple's member names and value
/// shapes (dates as integer milliseconds, `autoRenewStatus` as 0 or 1, members without a value left out).
extension FakeStoreKit {
    /// The decoded payload of `transaction`'s signed transaction, signed at `signedDate`.
    static func payload(_ transaction: FakeStoreKitTransaction, signedDate: Int64) -> JSONValue {
        var payload: [String: JSONValue] = [
            "transactionId": .string(transaction.transactionID),
            "originalTransactionId": .string(transaction.originalTransactionID),
            "bundleId": .string(transaction.bundleID),
            "productId": .string(transaction.productID),
            "purchaseDate": .int(Int(transaction.purchaseDate)),
            "originalPurchaseDate": .int(Int(transaction.originalPurchaseDate)),
            "quantity": .int(transaction.quantity),
            "type": .string(transaction.type.appleType),
            "inAppOwnershipType": .string(transaction.ownership == .familyShared ? "FAMILY_SHARED" : "PURCHASED"),
            "signedDate": .int(Int(signedDate)),
            "environment": .string(transaction.environment.rawValue),
            "transactionReason": .string(transaction.transactionReason),
            "storefront": .string(transaction.storefront),
            "storefrontId": .string(transaction.storefrontID),
            "price": .int(Int(transaction.price)),
            "currency": .string(transaction.currency),
            "appTransactionId": .string(transaction.appTransactionID),
        ]
        payload["webOrderLineItemId"] = transaction.webOrderLineItemID.map(JSONValue.string)
        payload["subscriptionGroupIdentifier"] = transaction.subscriptionGroupIdentifier.map(JSONValue.string)
        payload["expiresDate"] = transaction.expiresDate.map { .int(Int($0)) }
        payload["appAccountToken"] = transaction.appAccountToken.map(JSONValue.string)
        payload["revocationDate"] = transaction.revocationDate.map { .int(Int($0)) }
        payload["revocationReason"] = transaction.revocationReason.map(JSONValue.int)
        if transaction.isUpgraded { payload["isUpgraded"] = true }
        return .object(payload)
    }

    /// The decoded payload of the signed renewal info of the subscription `originalTransactionID`, signed at
    /// `signedDate`; nil for anything but an auto-renewable subscription.
    func renewalPayload(_ originalTransactionID: String, signedDate: Int64) -> JSONValue? {
        guard let renewal = renewals[originalTransactionID], let latest = chain(originalTransactionID).last else { return nil }
        var payload: [String: JSONValue] = [
            "originalTransactionId": .string(renewal.originalTransactionID),
            "productId": .string(renewal.productID),
            "autoRenewProductId": .string(renewal.autoRenewProductID),
            "autoRenewStatus": .int(renewal.autoRenewStatus ? 1 : 0),
            "isInBillingRetryPeriod": .bool(renewal.isInBillingRetryPeriod),
            "signedDate": .int(Int(signedDate)),
            "environment": .string(latest.environment.rawValue),
            "recentSubscriptionStartDate": .int(Int(renewal.recentSubscriptionStartDate)),
            "renewalPrice": .int(Int(renewal.renewalPrice)),
            "currency": .string(renewal.currency),
            "appTransactionId": .string(latest.appTransactionID),
        ]
        payload["renewalDate"] = latest.expiresDate.map { .int(Int($0)) }
        payload["expirationIntent"] = renewal.expirationIntent.map(JSONValue.int)
        payload["gracePeriodExpiresDate"] = renewal.gracePeriodExpiresDate.map { .int(Int($0)) }
        payload["appAccountToken"] = latest.appAccountToken.map(JSONValue.string)
        return .object(payload)
    }

    /// A server notification (version 2.0) about `transactionID` (none for `TEST` and the like): its
    /// `data` names the app and the environment (the transaction's, else `environment`) and carries the
    /// signed transaction, and for an auto-renewable subscription the signed renewal info and the status.
    /// The nested payloads are signed by `chain` at `signedDate` too.
    func notificationPayload(
        type: String, subtype: String?, uuid: String, transactionID: String?, environment: StoreEnvironment,
        signedDate: Int64, now: Int64, chain: FakeSigningChain
    ) -> JSONValue {
        var data: [String: JSONValue] = [
            "appAppleId": .int(Int(settings.appAppleID)),
            "bundleId": .string(settings.bundleID),
            "bundleVersion": "1",
            "environment": .string(environment.rawValue),
        ]
        if let transactionID, let transaction = transactions[transactionID] {
            data["environment"] = .string(transaction.environment.rawValue)
            data["signedTransactionInfo"] = .string(chain.sign(Self.payload(transaction, signedDate: signedDate)))
            if let renewal = renewalPayload(transaction.originalTransactionID, signedDate: signedDate) {
                data["signedRenewalInfo"] = .string(chain.sign(renewal))
            }
            data["status"] = status(of: transaction.originalTransactionID, now: now).map { .int($0.rawValue) }
        }
        var payload: [String: JSONValue] = [
            "notificationType": .string(type),
            "notificationUUID": .string(uuid),
            "version": "2.0",
            "signedDate": .int(Int(signedDate)),
            "data": .object(data),
        ]
        payload["subtype"] = subtype.map(JSONValue.string)
        return .object(payload)
    }
}
