import Foundation

/// The payload of a signed app transaction (StoreKit 2's `AppTransaction.jwsRepresentation`): the customer's
/// purchase of the app itself, as the App Store signed it.
public struct AppStoreAppTransaction: AppStoreDecodable, Sendable, Hashable {
    /// `bundleId`: the app the transaction is for.
    public var bundleID: String?
    /// `appAppleId`: the App Store's numeric id of the app (absent in Xcode and sandbox testing).
    public var appAppleID: Int64?
    /// `receiptType` (`Production`, `Sandbox`…): the environment that signed it.
    public var receiptType: String?
    /// `appTransactionId`: the id Apple gives the customer's download of the app, stable across devices.
    public var appTransactionID: String?
    /// `applicationVersion`: the app version the transaction applies to.
    public var applicationVersion: String?
    /// `originalApplicationVersion`: the app version the customer first bought or downloaded.
    public var originalApplicationVersion: String?
    /// `originalPurchaseDate`: when the customer first bought or downloaded the app.
    public var originalPurchaseDate: Date?
    /// `receiptCreationDate`: when the App Store signed it (an app transaction has no `signedDate`).
    public var receiptCreationDate: Date?
    /// `preorderDate`: when the customer pre-ordered the app, if they did.
    public var preorderDate: Date?
    /// `originalPlatform` (`iOS`, `macOS`…), where Apple sends it.
    public var originalPlatform: String?

    private enum CodingKeys: String, CodingKey {
        case bundleId, appAppleId, receiptType, appTransactionId, applicationVersion, originalApplicationVersion
        case originalPurchaseDate, receiptCreationDate, preorderDate, originalPlatform
    }

    /// Decodes the payload leniently; prefer `init(jsonData:)`, whose errors name the offending field.
    public init(from decoder: any Decoder) throws {
        let payload = try decoder.container(keyedBy: CodingKeys.self)
        bundleID = try payload.appleString(.bundleId)
        appAppleID = try payload.appleInt(.appAppleId).map(Int64.init)
        receiptType = try payload.appleString(.receiptType)
        appTransactionID = try payload.appleString(.appTransactionId)
        applicationVersion = try payload.appleString(.applicationVersion)
        originalApplicationVersion = try payload.appleString(.originalApplicationVersion)
        originalPurchaseDate = try payload.appleMilliseconds(.originalPurchaseDate)
        receiptCreationDate = try payload.appleMilliseconds(.receiptCreationDate)
        preorderDate = try payload.appleMilliseconds(.preorderDate)
        originalPlatform = try payload.appleString(.originalPlatform)
    }
}
