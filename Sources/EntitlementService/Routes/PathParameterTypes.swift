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
        guard InputRules.isText(text, maxLength: 128) else { return nil }
        // ASCII (most ids) is printable once `isText` has passed it, and composed: one pass over its bytes.
        guard text.utf8.allSatisfy({ $0 < 0x80 }) || (Self.isPrintable(text) && Self.isComposed(text)) else { return nil }
        value = text
    }

    /// Whether `text` has no character that prints as nothing that can be told apart: line and paragraph
    /// separators (U+2028, U+2029), private use, unassigned code points and noncharacters (U+FFFE). Control
    /// characters are `InputRules.isText`'s; format characters may join others (the ZWJ of an emoji sequence).
    static func isPrintable(_ text: String) -> Bool {
        !text.unicodeScalars.contains {
            switch $0.properties.generalCategory {
            case .lineSeparator, .paragraphSeparator, .privateUse, .unassigned, .surrogate: true
            default: false
            }
        }
    }

    /// Whether `text` is in normalization form C (ASCII always is: the caller passes it without asking).
    static func isComposed(_ text: String) -> Bool {
        text.precomposedStringWithCanonicalMapping.utf8.elementsEqual(text.utf8)
    }

    static let pathParameterRequirement = "must be 1 to 128 printable characters, in Unicode normalization form C"
}

/// The id of a submission, order, grant or webhook event: a UUID.
struct ResourceID: PathParameterValue {
    let uuid: UUID

    init?(pathParameter text: String) {
        guard let uuid = UUID.exactly(text) else { return nil }
        self.uuid = uuid
    }

    static let pathParameterRequirement = "must be a UUID"

    /// The id in path parameter `name`. A text that is not a UUID is the id of nothing: the route's own 404 for
    /// an unknown id (`missing`), not a 400, since the contract gives these ids no form.
    static func named(_ name: String, in parameters: HTTPPathParameters, missing: ProblemError) throws -> UUID {
        guard let id = try? parameters.require(name, as: ResourceID.self) else { throw missing }
        return id.uuid
    }

    /// The 404 of a route whose `field` names no `resource`.
    static func notFound(_ resource: String, field: String) -> ProblemError {
        ProblemError(status: 404, detail: "No \(resource) has this \(field).", extra: ["field": .string(field)])
    }
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
