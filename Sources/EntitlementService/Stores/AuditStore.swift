import ServiceRuntime
import Foundation

/// What `GET /v1/admin/audit` reads: ``AuditStore``, or a stand-in where a route test runs without PostgreSQL.
@Loop
protocol AuditReading: Sendable {
    /// One page of the audit log, newest first, and the cursor of the next older page when there is one.
    func page(_ query: AuditQuery, on db: some PostgresQueryable) async throws -> PageBody<AuditEventBody>
}

/// The `audit_events` table: admin actions and ownership transfers, each written in the same database
/// transaction as the change it records, and read back newest first a page at a time.
///
/// The actor is always a key id (`admin#1`), never a key.
@Loop
struct AuditStore: AuditReading {
    /// The actions recorded: the admin routes' and the purchase recorder's ownership transfers.
    enum Action: String, Sendable {
        case grantCreate = "grant.create"
        case grantRevoke = "grant.revoke"
        case productPut = "product.put"
        case appleOrderAttach = "apple_order.attach"
        case ownershipTransfer = "ownership.transfer"
    }

    /// Records one event by `actor` about `subject` (and `userID`, when it concerns a user), with the state
    /// before and after the change; run it on the connection of the change's transaction.
    func record(actor: String, action: Action, subject: String, userID: String?, before: PostgresJSON?, after: PostgresJSON?,
                on db: some PostgresQueryable) async throws {
        _ = try await db.query("""
            INSERT INTO audit_events (actor, action, subject, user_id, before, after)
            VALUES ($1, $2, $3, $4, $5, $6)
            """, [actor, action.rawValue, subject, userID, before, after])
    }

    func page(_ query: AuditQuery, on db: some PostgresQueryable) async throws -> PageBody<AuditEventBody> {
        // Only the filters asked for, so the newest-first index serves the cursor.
        var conditions: [String] = []
        var parameters: [any PostgresEncodable] = []
        func bind(_ value: any PostgresEncodable) -> String {
            parameters.append(value)
            return "$\(parameters.count)"
        }
        if let cursor = query.cursor {
            let micros = bind(cursor.occurredMicroseconds), id = bind(cursor.eventID)
            conditions.append("(occurred_at, event_id) < (timestamptz 'epoch' + \(micros) * interval '1 microsecond', \(id))")
        }
        if let userID = query.userID {
            // A transfer is about the user it left too (named in its `before`).
            let user = bind(userID)
            conditions.append("(user_id = \(user) OR (action = '\(Action.ownershipTransfer.rawValue)' AND before->>'user_id' = \(user)))")
        }
        if let action = query.action { conditions.append("action = \(bind(action))") }
        let filter = conditions.isEmpty ? "" : "WHERE " + conditions.joined(separator: " AND ")
        let rows = try await db.query("""
            SELECT event_id, occurred_at, (extract(epoch FROM occurred_at) * 1000000)::bigint AS occurred_us,
                   actor, action, subject, user_id, before, after
              FROM audit_events
             \(filter)
             ORDER BY occurred_at DESC, event_id DESC
             LIMIT \(bind(query.limit + 1))
            """, parameters).rows
        let page = rows.prefix(query.limit)
        let events = try page.map(AuditEventBody.init(row:))
        var next: AuditCursor?
        if rows.count > query.limit, let last = page.last {
            next = AuditCursor(occurredMicroseconds: try last.int64("occurred_us"), eventID: try last.int64("event_id"))
        }
        return PageBody(items: events, nextCursor: next?.text)
    }
}

private extension AuditEventBody {
    init(row: PostgresRow) throws {
        self.init(eventID: try row.int64("event_id"), occurredAt: try row.date("occurred_at"), actor: try row.string("actor"),
                  action: try row.string("action"), subject: try row.string("subject"), userID: try row.optionalString("user_id"),
                  before: try Self.json(row.optionalString("before")), after: try Self.json(row.optionalString("after")))
    }

    /// A `jsonb` column's text as a JSON value; SQL NULL as JSON null.
    static func json(_ text: String?) throws -> JSONValue {
        guard let text else { return .null }
        return try JSONDecoder().decode(JSONValue.self, from: Data(text.utf8))
    }
}
