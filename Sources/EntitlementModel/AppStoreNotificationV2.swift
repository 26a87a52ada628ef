import Foundation

/// The payload of an App Store Server Notification V2 (`signedPayload`, once its signature is verified): what
/// happened, to which app, and the still-signed transaction and renewal info it concerns.
public struct AppStoreNotificationV2: AppStoreDecodable, Sendable, Hashable {
    /// `SUBSCRIBED`, `DID_RENEW`, `REFUND`, `TEST`…, as Apple wrote it.
    public var notificationType: String
    /// `INITIAL_BUY`, `AUTO_RENEW_DISABLED`…, when the type has one.
    public var subtype: String?
    /// Apple's id of the notification; a retried notification keeps it.
    public var notificationUUID: String?
    /// `data.bundleId` (`summary.bundleId` for summary notifications): the app the notification is for.
    public var bundleID: String?
    /// `data.environment` or `summary.environment` (`nil` for Apple's `Xcode` and `LocalTesting`).
    public var environment: StoreEnvironment?
    /// `data.signedTransactionInfo`: a JWS whose payload decodes as `AppStoreTransactionV2`.
    public var signedTransactionInfo: String?
    /// `data.signedRenewalInfo`: a JWS whose payload decodes as `AppStoreRenewalInfoV2`.
    public var signedRenewalInfo: String?

    private enum CodingKeys: String, CodingKey {
        case notificationType, subtype, notificationUUID, data, summary
    }

    private enum DataKeys: String, CodingKey {
        case bundleId, environment, signedTransactionInfo, signedRenewalInfo
    }

    /// Decodes the payload leniently; prefer `init(jsonData:)`, whose errors name the offending field.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        notificationType = try container.appleRequiredString(.notificationType)
        subtype = try container.appleString(.subtype)
        notificationUUID = try container.appleString(.notificationUUID)
        // Summary notifications (RENEWAL_EXTENSION/SUMMARY) carry `summary`, with no transaction, instead of `data`.
        guard let part = try [CodingKeys.data, .summary].first(where: { try container.contains($0) && !container.decodeNil(forKey: $0) }) else { return }
        let data = try container.nestedContainer(keyedBy: DataKeys.self, forKey: part)
        bundleID = try data.appleString(.bundleId)
        environment = try data.appleEnvironment(.environment)
        signedTransactionInfo = try data.appleString(.signedTransactionInfo)
        signedRenewalInfo = try data.appleString(.signedRenewalInfo)
    }
}
