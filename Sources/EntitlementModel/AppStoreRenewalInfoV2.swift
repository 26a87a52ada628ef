import Foundation

/// The payload of signed renewal info (`JWSRenewalInfoDecodedPayload`) mapped into the domain's `RenewalInfo`.
public struct AppStoreRenewalInfoV2: AppStoreDecodable, Sendable, Hashable {
    /// The renewal state as the service records it.
    public var renewal: RenewalInfo
    /// `environment` (`nil` for Apple's `Xcode` and `LocalTesting`).
    public var environment: StoreEnvironment?

    private enum CodingKeys: String, CodingKey {
        case originalTransactionId, productId, autoRenewProductId, autoRenewStatus, expirationIntent
        case isInBillingRetryPeriod, gracePeriodExpiresDate, priceIncreaseStatus, environment, signedDate
    }

    /// Decodes the payload leniently; prefer `init(jsonData:)`, whose errors name the offending field.
    public init(from decoder: any Decoder) throws {
        let payload = try decoder.container(keyedBy: CodingKeys.self)
        renewal = RenewalInfo(
            originalTransactionID: try payload.appleRequiredString(.originalTransactionId),
            productID: try payload.appleRequiredString(.productId),
            autoRenewProductID: try payload.appleString(.autoRenewProductId),
            willRenew: try payload.appleBool(.autoRenewStatus) ?? false,
            expirationIntent: try payload.appleInt(.expirationIntent),
            isInBillingRetryPeriod: try payload.appleBool(.isInBillingRetryPeriod) ?? false,
            gracePeriodExpiresDate: try payload.appleMilliseconds(.gracePeriodExpiresDate),
            // Apple's `priceIncreaseStatus` 1 (consented) means what `price_consent_status` 1 meant.
            priceConsentStatus: try payload.appleInt(.priceIncreaseStatus),
            signedDate: try payload.appleMilliseconds(.signedDate)
        )
        environment = try payload.appleEnvironment(.environment)
    }
}
