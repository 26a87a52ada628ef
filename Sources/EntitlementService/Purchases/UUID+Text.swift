import Foundation

extension UUID {
    /// The canonical lowercase text form, as the API and PostgreSQL write UUIDs.
    var lowercasedString: String { uuidString.lowercased() }

    /// The UUID `text` spells, in the 36-character hyphenated form (any case); nil for anything else. Foundation's
    /// `UUID(uuidString:)` alone reads its argument as a C string on Linux: text after a NUL would be ignored.
    init?(exactly text: String) {
        guard text.utf8.count == 36, let uuid = UUID(uuidString: text) else { return nil }
        self = uuid
    }
}
