import ServiceRuntime
import Foundation

/// A user id: 1–128 printable characters (see `InputRules.isText`).
struct UserID: PathParameterValue {
    let value: String

    init?(pathParameter text: String) {
        guard InputRules.isText(text, maxLength: 128) else { return nil }
        value = text
    }

    static let pathParameterRequirement = "must be 1 to 128 printable characters"
}

/// The id of a submission, order or grant: a UUID.
struct ResourceID: PathParameterValue {
    let uuid: UUID

    init?(pathParameter text: String) {
        guard let uuid = UUID(exactly: text) else { return nil }
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
