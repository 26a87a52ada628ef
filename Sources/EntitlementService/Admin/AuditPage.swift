import ServiceRuntime
import EntitlementModel
import Foundation

/// What `GET /v1/admin/audit` asks for: at most `limit` events older than `cursor` (the newest when nil),
/// optionally only those about `userID` or with `action`.
struct AuditQuery: Sendable {
    var limit: Int
    var cursor: AuditCursor?
    var userID: String?
    var action: String?
}

/// Where a page of the audit log ends: the sort key of its last (oldest) event. Opaque to clients: the
/// base64url text of `v1:<microseconds since 1970>:<event id>`.
struct AuditCursor: Sendable, Equatable {
    var occurredMicroseconds: Int64
    var eventID: Int64

    /// Instants PostgreSQL can hold and the audit log can have written: about 4685 BC to AD 10000.
    private static let representable: ClosedRange<Int64> = -210_000_000_000_000_000...253_402_300_800_000_000

    /// The text handed to clients as `next_cursor`.
    var text: String {
        Data("v1:\(occurredMicroseconds):\(eventID)".utf8).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    init(occurredMicroseconds: Int64, eventID: Int64) {
        self.occurredMicroseconds = occurredMicroseconds
        self.eventID = eventID
    }

    /// Reads a cursor this service handed out; nil for anything else.
    init?(text: String) {
        guard (1...64).contains(text.utf8.count),
              text.utf8.allSatisfy({ $0.isBase64URLDigit }) else { return nil }
        var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        base64 += String(repeating: "=", count: (4 - base64.utf8.count % 4) % 4)
        guard let data = Data(base64Encoded: base64), let decoded = String(data: data, encoding: .utf8) else { return nil }
        let parts = decoded.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 3, parts[0] == "v1", let micros = Int64(parts[1]), let id = Int64(parts[2]), id > 0,
              Self.representable.contains(micros) else { return nil }
        self.init(occurredMicroseconds: micros, eventID: id)
    }
}

private extension UInt8 {
    var isBase64URLDigit: Bool {
        (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(self) || (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(self)
            || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(self) || self == UInt8(ascii: "-") || self == UInt8(ascii: "_")
    }
}

/// One event of `GET /v1/admin/audit`.
struct AuditEventBody: Encodable {
    var eventID: Int64
    var occurredAt: Date
    var actor: String
    var action: String
    var subject: String
    var userID: String?
    var before: JSONValue
    var after: JSONValue

    enum CodingKeys: String, CodingKey {
        case eventID = "event_id", occurredAt = "occurred_at", actor, action, subject, userID = "user_id", before, after
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(eventID, forKey: .eventID)
        try container.encode(RFC3339.string(from: occurredAt), forKey: .occurredAt)
        try container.encode(actor, forKey: .actor)
        try container.encode(action, forKey: .action)
        try container.encode(subject, forKey: .subject)
        try container.encode(userID, forKey: .userID)
        try container.encode(before, forKey: .before)
        try container.encode(after, forKey: .after)
    }
}

extension AuditEventBody: PageItem {
    static let listKey = "events"
}
