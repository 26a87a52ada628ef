import AppStore
import ServiceRuntime
import EntitlementModel
import Foundation

/// Checks of client input shared by the routes; each failure is a 400 problem naming the field.
enum InputRules {
    /// User ids are 1–128 printable characters (no control characters, not only spaces), in Unicode
    /// normalization form C (``UserID``). Characters are counted as Unicode scalars, as JSON Schema's `maxLength`
    /// counts them.
    static func userID(_ value: String, field: String = "user_id") throws -> String {
        try UserID(validating: value, field: field).value
    }

    /// 1–`maxLength` Unicode scalars (as JSON Schema's `maxLength` counts), not blank (nothing but spaces, format
    /// characters and other default-ignorable ones, invisible: U+200D, U+FEFF, U+034F, U+FE0F, U+3164), and no
    /// control characters but the `allowed` ones.
    static func isText(_ value: String, maxLength: Int, allowing allowed: Set<Unicode.Scalar> = []) -> Bool {
        // Visible ASCII alone (most ids) is neither blank nor control: only its length decides.
        if value.utf8.allSatisfy({ (0x21...0x7E).contains($0) }) { return (1...maxLength).contains(value.utf8.count) }
        return (1...maxLength).contains(value.unicodeScalars.count)
            && !value.unicodeScalars.allSatisfy {
                $0.properties.isWhitespace || $0.properties.isDefaultIgnorableCodePoint || $0.properties.generalCategory == .format
            }
            && !value.unicodeScalars.contains { $0.properties.generalCategory == .control && !allowed.contains($0) }
    }

    /// A UUID, or a 400 problem naming `field`.
    static func uuid(_ value: String, field: String) throws -> UUID {
        try ResourceID(validating: value, field: field).uuid
    }

    /// A short identifier-like string: 1–`maxLength` printable characters (Unicode scalars).
    static func token(_ value: String, field: String, maxLength: Int = 200) throws -> String {
        guard isToken(value, maxLength: maxLength) else {
            throw ProblemError.badRequest("'\(field)' \(tokenRequirement(maxLength: maxLength)).", field: field)
        }
        return value
    }

    /// 1–`maxLength` Unicode scalars, none a space or a control character.
    static func isToken(_ value: String, maxLength: Int) -> Bool {
        (1...maxLength).contains(value.unicodeScalars.count) && value.unicodeScalars.allSatisfy({ $0.value > 0x20 && $0.value != 0x7f })
    }

    /// What `isToken` asks, for a problem's detail.
    static func tokenRequirement(maxLength: Int) -> String {
        "must be 1 to \(maxLength) printable characters without spaces"
    }

    /// An integer query parameter within `range`, or `fallback` when absent.
    static func queryInt(_ request: HTTPRequest, _ name: String, in range: ClosedRange<Int>, default fallback: Int) throws -> Int {
        guard let raw = request.query[name] else { return fallback }
        guard let value = Int(raw), range.contains(value) else {
            throw ProblemError.badRequest("'\(name)' must be an integer from \(range.lowerBound) to \(range.upperBound).", field: name)
        }
        return value
    }

    /// An RFC 3339 query parameter, or nil when absent.
    static func queryDate(_ request: HTTPRequest, _ name: String) throws -> Date? {
        guard let raw = request.query[name] else { return nil }
        if let date = RFC3339.date(from: raw) { return date }
        throw ProblemError.badRequest("'\(name)' must be an RFC 3339 timestamp such as 2026-11-22T01:20:00Z.", field: name)
    }

    /// The bytes of a posted `receipt_data`: standard base64, whitespace between groups tolerated (as Apple's own
    /// receipts have). Empty is a 400; not base64 is a 422 "Receipt rejected", both naming the field. ASCII text
    /// (every real receipt) is filtered byte by byte: filtering a 140 KB receipt by `Character` held the loop 6.5 ms.
    static func receiptBytes(_ value: String) throws -> [UInt8] {
        guard !value.isEmpty else { throw ProblemError.badRequest("'receipt_data' must not be empty.", field: "receipt_data") }
        let compact = value.utf8.allSatisfy { $0 < 0x80 }
            ? value.utf8.filter { !(0x09...0x0D).contains($0) && $0 != 0x20 }  // ASCII's White_Space
            : Array(value.filter { !$0.isWhitespace }.utf8)
        // Canonical base64 only (the padding exactly what the length needs): what Apple is sent is what was posted.
        guard let bytes = StrictBase64.decode(compact, .standard), !bytes.isEmpty else {
            throw ProblemError(status: 422, title: "Receipt rejected", detail: "'receipt_data' is not valid base64.",
                               extra: ["field": "receipt_data"])
        }
        return bytes
    }
}
