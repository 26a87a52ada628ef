import ServiceRuntime
import EntitlementModel

/// The JSON object of a control request (or one nested in it), read member by member: an unknown member or
/// a value of the wrong shape is a 400 problem naming the member by its path (`notify.copies`,
/// `notifications[3].transaction_id`).
struct FakeControlBody {
    private let members: [String: JSONValue]
    /// The path of this object in the request, with a trailing dot; empty for the body itself.
    private let path: String

    /// The body of `request`; an empty body reads as `{}` when `emptyAllowed`.
    init(_ request: HTTPRequest, allowed: Set<String>, emptyAllowed: Bool = false) throws {
        if emptyAllowed && request.body.allSatisfy({ $0 == 0x20 || $0 == 0x0A || $0 == 0x0D || $0 == 0x09 }) {
            self.init(members: [:], path: "")
            return
        }
        try self.init(try request.decodeJSON(JSONValue.self), at: "", allowed: allowed)
    }

    /// `value`, which must be an object holding only `allowed` members; `path` names it in problems.
    init(_ value: JSONValue, at path: String, allowed: Set<String>) throws {
        guard case .object(let members) = value else {
            throw ProblemError.badRequest(path.isEmpty ? "The request body must be a JSON object." : "'\(path)' must be a JSON object.",
                                          field: path.isEmpty ? nil : path)
        }
        let prefix = path.isEmpty ? "" : path + "."
        if let unknown = members.keys.sorted().first(where: { !allowed.contains($0) }) {
            throw ProblemError.badRequest(
                "Unknown key '\(prefix + unknown)' (expected \(allowed.sorted().joined(separator: ", "))).", field: prefix + unknown)
        }
        self.init(members: members, path: prefix)
    }

    private init(members: [String: JSONValue], path: String) {
        self.members = members
        self.path = path
    }

    /// A problem naming member `key`.
    func problem(_ key: String, _ expectation: String) -> ProblemError {
        .badRequest("The field '\(path + key)' must be \(expectation).", field: path + key)
    }

    /// A non-empty string, or nil when absent.
    func string(_ key: String) throws -> String? {
        guard let value = members[key] else { return nil }
        guard case .string(let text) = value, !text.isEmpty else { throw problem(key, "a non-empty string") }
        return text
    }

    /// Three capital letters (a currency or a country code), or nil when absent; `expectation` says which.
    func code(_ key: String, _ expectation: String) throws -> String? {
        guard let text = try string(key) else { return nil }
        guard text.utf8.count == 3, text.utf8.allSatisfy({ (65...90).contains($0) }) else { throw problem(key, expectation) }
        return text
    }

    /// An integer in `range`, or nil when absent.
    func int(_ key: String, in range: ClosedRange<Int>) throws -> Int? {
        guard let value = members[key] else { return nil }
        guard case .int(let number) = value, range.contains(number) else {
            throw problem(key, "an integer in \(range.lowerBound)...\(range.upperBound)")
        }
        return number
    }

    /// A number in `range` (an integer or not), or nil when absent.
    func number(_ key: String, in range: ClosedRange<Double>) throws -> Double? {
        let value: Double
        switch members[key] {
        case nil: return nil
        case .int(let number)?: value = Double(number)
        case .double(let number)?: value = number
        default: throw problem(key, "a number in \(range.lowerBound)...\(range.upperBound)")
        }
        guard range.contains(value) else { throw problem(key, "a number in \(range.lowerBound)...\(range.upperBound)") }
        return value
    }

    /// Whether member `key` is present and `null` (which some settings read as "none").
    func isNull(_ key: String) -> Bool {
        members[key] == .null
    }

    /// A boolean, or nil when absent.
    func bool(_ key: String) throws -> Bool? {
        guard let value = members[key] else { return nil }
        guard case .bool(let flag) = value else { throw problem(key, "a boolean") }
        return flag
    }

    /// An instant as milliseconds since 1970: an integer of milliseconds (Apple's form) or an RFC 3339
    /// string; nil when absent.
    func date(_ key: String) throws -> Int64? {
        switch members[key] {
        case nil: return nil
        case .int(let milliseconds)? where milliseconds >= 0: return Int64(milliseconds)
        case .string(let text)?:
            if let date = RFC3339.date(from: text) { return Int64((date.timeIntervalSince1970 * 1_000).rounded(.down)) }
        default: break
        }
        throw problem(key, "milliseconds since 1970 or an RFC 3339 date-time")
    }

    /// One of `choices` (by their string), or nil when absent.
    func choice<T>(_ key: String, _ choices: [String: T]) throws -> T? {
        guard let value = members[key] else { return nil }
        guard case .string(let text) = value, let choice = choices[text] else {
            throw problem(key, "one of " + choices.keys.sorted().map { "\"\($0)\"" }.joined(separator: ", "))
        }
        return choice
    }

    /// The nested object `key`, or nil when absent.
    func object(_ key: String, allowed: Set<String>) throws -> FakeControlBody? {
        guard let value = members[key] else { return nil }
        return try FakeControlBody(value, at: path + key, allowed: allowed)
    }

    /// The objects of the array `key` (at most `limit`), or nil when absent.
    func objects(_ key: String, allowed: Set<String>, limit: Int) throws -> [FakeControlBody]? {
        guard let value = members[key] else { return nil }
        guard case .array(let list) = value, !list.isEmpty, list.count <= limit else {
            throw problem(key, "an array of 1 to \(limit) objects")
        }
        return try list.enumerated().map { index, element in
            try FakeControlBody(element, at: "\(path + key)[\(index)]", allowed: allowed)
        }
    }
}
