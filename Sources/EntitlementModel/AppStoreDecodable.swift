import Foundation

/// A JSON body from Apple (a verifyReceipt answer, a notification, a verified signed payload) decoded leniently,
/// whose failures name the offending field.
public protocol AppStoreDecodable: Decodable {}

extension AppStoreDecodable {
    /// Decodes `jsonData`, turning any failure into an `AppStoreDecodingError` that names the field.
    public init(jsonData: Data) throws(AppStoreDecodingError) {
        do {
            self = try JSONDecoder().decode(Self.self, from: jsonData)
        } catch {
            throw AppStoreDecodingError(error)
        }
    }
}
