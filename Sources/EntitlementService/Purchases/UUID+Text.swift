import Foundation

extension UUID {
    /// The canonical lowercase text form, as the API and PostgreSQL write UUIDs.
    var lowercasedString: String { uuidString.lowercased() }

    /// The UUID `text` spells, in the 36-character hyphenated form (any case); nil for anything else. Foundation's
    /// `UUID(uuidString:)` alone reads its argument as a C string on Linux: text after a NUL would be ignored.
    /// (A function, not a failable initializer: inlined as one into an async route, it crashed the release
    /// compiler's coroutine splitting.)
    @inline(never)
    static func exactly(_ text: String) -> UUID? {
        text.utf8.count == 36 ? UUID(uuidString: text) : nil
    }
}
