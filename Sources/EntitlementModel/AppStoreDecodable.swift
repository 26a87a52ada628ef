import Foundation

extension Decodable {
    /// Decodes `jsonData` as `Self`, turning any failure into an `AppStoreDecodingError` that names the field.
    static func decodedAppStorePayload(_ jsonData: Data) throws(AppStoreDecodingError) -> Self {
        do {
            return try JSONDecoder().decode(Self.self, from: jsonData)
        } catch {
            throw AppStoreDecodingError(error)
        }
    }
}
