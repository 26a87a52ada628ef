import ServiceRuntime
import EntitlementModel
import Foundation

/// The `audit_events` table: admin actions and ownership transfers, each written in the same database
/// transaction as the change it records, and read back newest first a page at a time.
///
/// The actor is always a key id (`admin#1`), never a key.
@Loop
struct AuditLog {
    let db: PostgresPool

    /// The actions recorded: the admin routes' and the purchase recorder's ownership transfers.
    enum Action {
        static let grantCreate = "grant.create"
        static let grantRevoke = "grant.revoke"
        static let productPut = "product.put"
        static let ownershipTransfer = "ownership.transfer"
    }

    /// The statement that records one event; run it in the transaction of the change.
    static func record(actor: String, action: String, subject: String, userID: String?,
                       before: PostgresJSON?, after: PostgresJSON?) -> PostgresStatement {
        PostgresStatement("""
            INSERT INTO audit_events (actor, action, subject, user_id, before, after)
            VALUES ($1, $2, $3, $4, $5, $6)
            """, [actor, action, subject, userID, before, after])
    }

    /// What to read: at most `limit` events older than `cursor` (the newest when nil), optionally only those
    /// about `userID` or with `action`.
    struct Query: Sendable {
        var limit: Int
        var cursor: AuditCursor?
        var userID: String?
        var action: String?
    }

    /// One page, newest first, and the cursor of the next older page when there is one.
    func page(_ query: Query) async throws -> AuditPageBody {
        let rows = try await db.query("""
            SELECT event_id, occurred_at, (extract(epoch FROM occurred_at) * 1000000)::bigint AS occurred_us,
                   actor, action, subject, user_id, before::text AS before, after::text AS after
              FROM audit_events
             WHERE ($1::bigint IS NULL
                    OR (occurred_at, event_id) < (timestamptz 'epoch' + $1::bigint * interval '1 microsecond', $2::bigint))
               AND ($3::text IS NULL OR user_id = $3)
               AND ($4::text IS NULL OR action = $4)
             ORDER BY occurred_at DESC, event_id DESC
             LIMIT $5
            """, [query.cursor?.occurredMicroseconds, query.cursor?.eventID, query.userID, query.action, query.limit + 1]).rows
        let events = try rows.prefix(query.limit).map(AuditEventBody.init(row:))
        var next: AuditCursor?
        if rows.count > query.limit, let last = rows.prefix(query.limit).last {
            next = AuditCursor(occurredMicroseconds: try last.int64("occurred_us"), eventID: try last.int64("event_id"))
        }
        return AuditPageBody(events: events, nextCursor: next?.text)
    }
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

    init(row: PostgresRow) throws {
        eventID = try row.int64("event_id")
        occurredAt = try row.date("occurred_at")
        actor = try row.string("actor")
        action = try row.string("action")
        subject = try row.string("subject")
        userID = try row.optionalString("user_id")
        before = try Self.json(row.optionalString("before"))
        after = try Self.json(row.optionalString("after"))
    }

    private static func json(_ text: String?) throws -> JSONValue {
        guard let text else { return .null }
        return try JSONDecoder().decode(JSONValue.self, from: Data(text.utf8))
    }

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

/// `GET /v1/admin/audit`: newest first, and where the next older page starts.
struct AuditPageBody: Encodable {
    var events: [AuditEventBody]
    var nextCursor: String?

    enum CodingKeys: String, CodingKey { case events, nextCursor = "next_cursor" }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(events, forKey: .events)
        try container.encode(nextCursor, forKey: .nextCursor)
    }
}
