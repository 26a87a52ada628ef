import Foundation

extension UUID {
    /// The canonical lowercase text form, as the API and PostgreSQL write UUIDs.
    var lowercasedString: String { uuidString.lowercased() }
}
