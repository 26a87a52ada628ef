import ServiceRuntime
import EntitlementModel
import Foundation

/// Checks of admin input beyond `InputRules`; each failure is a 400 problem naming the field.
enum AdminInput {
    /// The latest instant an admin may name: the end of year 9999, the last one RFC 3339 can write.
    static let latestInstant = RFC3339.date(from: "9999-12-31T23:59:59Z")!

    /// Free text of 1–`maxLength` characters (Unicode scalars, as JSON Schema counts) that is not blank and holds no control characters (with
    /// `multiline`, line feeds, carriage returns and tabs are allowed).
    static func text(_ value: String, field: String, maxLength: Int, multiline: Bool = false) throws -> String {
        guard InputRules.isText(value, maxLength: maxLength, allowing: multiline ? ["\n", "\r", "\t"] : []) else {
            let lines = multiline ? " (line breaks and tabs allowed)" : ""
            throw ProblemError.badRequest("'\(field)' must be 1 to \(maxLength) characters, not blank, without control characters\(lines).",
                                          field: field)
        }
        return value
    }

    /// An RFC 3339 date-time no later than ``latestInstant``.
    static func instant(_ value: String, field: String) throws -> Date {
        guard let date = RFC3339.date(from: value) else {
            throw ProblemError.badRequest("'\(field)' must be an RFC 3339 date-time such as 2026-11-22T01:20:00Z.", field: field)
        }
        guard date <= latestInstant else {
            throw ProblemError.badRequest("'\(field)' must not be later than 9999-12-31T23:59:59Z.", field: field)
        }
        return date
    }

    /// The optional `limit` (1–500, default 50) and `cursor` (a `next_cursor` this service answered) of a
    /// paged admin list: the audit log, the notifications.
    static func page(_ request: HTTPRequest) throws -> (limit: Int, cursor: AuditCursor?) {
        let limit = try InputRules.queryInt(request, "limit", in: 1...500, default: 50)
        let cursor = try request.query["cursor"].map { text in
            guard let cursor = AuditCursor(text: text) else {
                throw ProblemError.badRequest("'cursor' must be a next_cursor this service answered.", field: "cursor")
            }
            return cursor
        }
        return (limit, cursor)
    }

    /// The purchase report's window `[from, to)` from the optional query parameters `from` and `to`, each floored to
    /// a whole second (the window used is the one the report writes): `to` defaults to now, as the end of the
    /// second now falls in (so a purchase of this very second counts), `from` to 30 days before `to`. A `from` that
    /// is not before `to` is named: `to` when given, else `from`.
    static func reportWindow(_ request: HTTPRequest, now: Date) throws -> (from: Date, to: Date) {
        let from = try request.query["from"].map { GrantStore.wholeSecond(try instant($0, field: "from")) }
        let givenTo = try request.query["to"].map { GrantStore.wholeSecond(try instant($0, field: "to")) }
        let to = givenTo ?? GrantStore.wholeSecond(now).addingTimeInterval(1)
        let start = from ?? to.addingTimeInterval(-30 * 86_400)
        guard start < to else {
            guard givenTo != nil else { throw ProblemError.badRequest("'from' must be in the past ('to' is now).", field: "from") }
            throw ProblemError.badRequest("'to' must be later than 'from'.", field: "to")
        }
        return (start, to)
    }

    /// An ISO 8601 duration longer than zero whose end, counted from `start`, is no later than ``latestInstant``.
    static func duration(_ value: String, field: String, from start: Date) throws -> Date {
        let duration: ISODuration
        do {
            duration = try ISODuration(parsing: value)
        } catch {
            throw ProblemError.badRequest("'\(field)' is not an ISO 8601 duration such as P1M, P7D or P1Y: \(error.reason).", field: field)
        }
        guard !duration.isZero else { throw ProblemError.badRequest("'\(field)' must be longer than zero.", field: field) }
        let end = duration.adding(to: start)
        guard end <= latestInstant else {
            throw ProblemError.badRequest("'\(field)' reaches past 9999-12-31T23:59:59Z.", field: field)
        }
        return end
    }

    /// An audit action name: 1–100 printable ASCII characters without spaces (`grant.create`).
    static func action(_ value: String) throws -> String {
        guard (1...100).contains(value.utf8.count), value.utf8.allSatisfy({ (0x21...0x7E).contains($0) }) else {
            throw ProblemError.badRequest("'action' must be 1 to 100 printable ASCII characters without spaces, such as grant.create.",
                                          field: "action")
        }
        return value
    }

    /// `interval` (`day` when absent) for a window that makes at most ``ReportInterval/maximumBuckets`` buckets.
    static func reportInterval(_ request: HTTPRequest, window: (from: Date, to: Date)) throws -> ReportInterval {
        guard let interval = ReportInterval(rawValue: request.query["interval"] ?? "day") else {
            throw ProblemError.badRequest("'interval' must be day, week or month.", field: "interval")
        }
        let limit = ReportInterval.maximumBuckets
        guard interval.bucketCount(from: window.from, to: window.to, limit: limit) <= limit else {
            throw ProblemError.badRequest("The window holds more than \(limit) \(interval.rawValue)s: take a longer interval or a shorter window.", field: "interval")
        }
        return interval
    }

    /// Whether the purchase report is asked for as CSV: `format=csv`, or an `Accept` naming `text/csv`
    /// (`format=json` wins over the header).
    static func wantsCSV(_ request: HTTPRequest) throws -> Bool {
        switch request.query["format"] {
        case "csv"?: return true
        case "json"?: return false
        case nil: return request.headers["Accept"]?.lowercased().contains("text/csv") == true
        default: throw ProblemError.badRequest("'format' must be json or csv.", field: "format")
        }
    }

    /// The optional `environment` query parameter: `Production` or `Sandbox`.
    static func queryEnvironment(_ request: HTTPRequest) throws -> StoreEnvironment? {
        guard let raw = request.query["environment"] else { return nil }
        guard let environment = StoreEnvironment(rawValue: raw) else {
            throw ProblemError.badRequest("'environment' must be Production or Sandbox.", field: "environment")
        }
        return environment
    }
}
