import Foundation

/// The payload of a signed transaction (`JWSTransactionDecodedPayload`) mapped into the domain's
/// `StoreTransaction`, with the fields that say where it belongs.
public struct AppStoreTransactionV2: AppStoreDecodable, Sendable, Hashable {
    /// The transaction as the service records it.
    public var transaction: StoreTransaction
    /// `bundleId`: the app the transaction is for.
    public var bundleID: String?
    /// `environment` (`nil` for Apple's `Xcode` and `LocalTesting`, and in early payloads that lack it).
    public var environment: StoreEnvironment?
    /// `type`: `Auto-Renewable Subscription`, `Consumable`…, as Apple wrote it (the catalog decides what counts).
    public var productType: String?

    private enum CodingKeys: String, CodingKey {
        case transactionId, originalTransactionId, productId, purchaseDate, originalPurchaseDate, expiresDate
        case revocationDate, revocationReason, revocationPercentage, isUpgraded, offerType, offerIdentifier, offerDiscountType
        case inAppOwnershipType, quantity, webOrderLineItemId, subscriptionGroupIdentifier, appAccountToken
        case bundleId, environment, type, signedDate
    }

    /// Apple's `offerType` for an introductory offer; 2 is a promotional offer (named by `offerIdentifier`).
    private static let introductoryOffer = 1, promotionalOffer = 2

    /// Decodes the payload leniently; prefer `init(jsonData:)`, whose errors name the offending field.
    public init(from decoder: any Decoder) throws {
        let payload = try decoder.container(keyedBy: CodingKeys.self)
        let transactionID = try payload.appleRequiredString(.transactionId)
        guard let purchaseDate = try payload.appleMilliseconds(.purchaseDate) else {
            throw DecodingError.keyNotFound(
                CodingKeys.purchaseDate, .init(codingPath: payload.codingPath, debugDescription: "a transaction needs purchaseDate"))
        }
        let offerType = try payload.appleInt(.offerType)
        let isFreeTrial = try payload.appleString(.offerDiscountType) == "FREE_TRIAL"
        transaction = StoreTransaction(
            transactionID: transactionID,
            originalTransactionID: try payload.appleString(.originalTransactionId) ?? transactionID,
            productID: try payload.appleRequiredString(.productId),
            purchaseDate: purchaseDate,
            originalPurchaseDate: try payload.appleMilliseconds(.originalPurchaseDate),
            expiresDate: try payload.appleMilliseconds(.expiresDate),
            cancellationDate: try payload.appleMilliseconds(.revocationDate),
            cancellationReason: try payload.appleString(.revocationReason),
            isUpgraded: try payload.appleBool(.isUpgraded) ?? false,
            // Free whatever the offer (introductory, promotional, offer code, win-back): no revenue, a trial.
            isTrialPeriod: isFreeTrial,
            isInIntroOfferPeriod: offerType == Self.introductoryOffer,
            ownership: try payload.appleString(.inAppOwnershipType)?.uppercased() == "FAMILY_SHARED" ? .familyShared : .purchased,
            quantity: try payload.appleInt(.quantity) ?? 1,
            webOrderLineItemID: try payload.appleString(.webOrderLineItemId),
            subscriptionGroupIdentifier: try payload.appleString(.subscriptionGroupIdentifier),
            appAccountToken: try payload.appleString(.appAccountToken),
            promotionalOfferID: offerType == Self.promotionalOffer ? try payload.appleString(.offerIdentifier) : nil,
            signedDate: try payload.appleMilliseconds(.signedDate),
            // A share refunded that does not read is taken for the whole (as a receipt's refund is), not a refusal.
            revocationPercentage: (try? payload.appleInt(.revocationPercentage)) ?? nil
        )
        bundleID = try payload.appleString(.bundleId)
        environment = try payload.appleEnvironment(.environment)
        productType = try payload.appleString(.type)
    }
}
