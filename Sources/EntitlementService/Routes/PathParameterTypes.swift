import ServiceRuntime
import Foundation

/// A user id: 1–128 printable characters (see `InputRules.isText`), in Unicode normalization form C.
///
/// Ids are stored and compared byte for byte (as PostgreSQL compares them), while Swift compares strings by
/// canonical equivalence: two spellings of one text (`é` as one code point, or as `e` and a combining accent)
/// would be two users in the database and one in the cache. Only the composed spelling comes in.
struct UserID: PathParameterValue {
    let value: String

    init?(pathParameter text: String) {
        guard InputRules.isText(text, maxLength: 128), Self.isComposed(text) else { return nil }
        value = text
    }

    /// Whether `text` is in normalization form C (ASCII always is).
    static func isComposed(_ text: String) -> Bool {
        text.utf8.allSatisfy { $0 < 0x80 } || text.precomposedStringWithCanonicalMapping.utf8.elementsEqual(text.utf8)
    }

    static let pathParameterRequirement = "must be 1 to 128 printable characters, in Unicode normalization form C"
}

/// The id of a submission, order or grant: a UUID.
struct ResourceID: PathParameterValue {
    let uuid: UUID

    init?(pathParameter text: String) {
        guard let uuid = UUID.exactly(text) else { return nil }
        self.uuid = uuid
    }

    static let pathParameterRequirement = "must be a UUID"
}

/// A consumable's currency: 1–255 printable characters without spaces.
struct Currency: PathParameterValue {
    let value: String

    init?(pathParameter text: String) {
        guard InputRules.isToken(text, maxLength: Self.maxLength) else { return nil }
        value = text
    }

    static let maxLength = 255
    static let pathParameterRequirement = InputRules.tokenRequirement(maxLength: maxLength)
}
