import Foundation

/// The parts of an App Store Server Notification V1 body that carry purchase state: its type, the shared
/// secret Apple echoes in `password`, and the `unified_receipt` (shaped like a verifyReceipt answer; older
/// notifications put `latest_receipt_info` at the top level instead, often as one iOS 6 style object).
public struct AppStoreNotificationV1: AppStoreDecodable, Sendable, Hashable {
    /// `INITIAL_BUY`, `DID_RENEW`, `CANCEL`, `DID_CHANGE_RENEWAL_STATUS`…, as Apple wrote it.
    public var notificationType: String
    /// The shared secret Apple sends back: compare it with the configured one, never log it.
    public var password: String?
    /// `unified_receipt.status` where the notification has a unified receipt that states one.
    public var unifiedReceiptStatus: Int?
    var contents: ReceiptContents

    /// The environment of the notification (`PROD` counts as production).
    public var environment: StoreEnvironment? { contents.environment }
    /// The newest base64 receipt of the subscription.
    public var latestReceipt: String? { contents.latestReceipt }

    private enum CodingKeys: String, CodingKey {
        case notificationType = "notification_type"
        case password
        case environment
        case unifiedReceipt = "unified_receipt"
    }

    private enum UnifiedReceiptKeys: String, CodingKey {
        case status
    }

    /// Decodes the notification leniently; prefer `init(jsonData:)`, whose errors name the offending field.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        notificationType = try container.appleRequiredString(.notificationType)
        password = try container.appleString(.password)
        let topLevel = try ReceiptContents(from: decoder)
        if container.contains(.unifiedReceipt) {
            unifiedReceiptStatus = try container.nestedContainer(keyedBy: UnifiedReceiptKeys.self, forKey: .unifiedReceipt)
                .appleInt(.status)
            contents = try container.decode(ReceiptContents.self, forKey: .unifiedReceipt)
            contents.environment = contents.environment ?? topLevel.environment
            contents.topLevelRenewal = topLevel.topLevelRenewal
        } else {
            unifiedReceiptStatus = nil
            contents = topLevel
        }
    }

    /// The transactions of the unified receipt, merged and ordered as `AppStoreResponse.transactions()` does.
    public func transactions() -> [StoreTransaction] { contents.transactions() }

    /// Renewal state from `pending_renewal_info`, or from the notification's own `auto_renew_status` and
    /// `auto_renew_product_id` for the subscription they name, as `AppStoreResponse.renewalInfo()` does.
    public func renewalInfo() -> [RenewalInfo] { contents.renewalInfo() }
}
