import ServiceRuntime
import EntitlementModel
import Foundation

/// An event claimed for one attempt: nobody else sends it until its lease ends or the outcome is recorded.
struct DeliveryClaim: Sendable {
    var eventID: UUID
    /// Fences the outcome: only the claim that is still current records one.
    var claimID: UUID
    var payload: String
    /// This attempt's number in its round (1 for the first send, and for the first after a redelivery).
    var attempt: Int
    var pendingSince: Date
}

/// How one attempt ended, to be recorded for its claim.
struct DeliveryOutcome: Sendable {
    var claim: DeliveryClaim
    /// `delivered`, `pending` (retried at `nextAttemptAt`) or `failed`.
    var status: WebhookDeliveryStatus
    var nextAttemptAt: Date?
    /// The receiver's HTTP status; nil when none answered.
    var responseStatus: Int?
    /// Why no answer came (timeout, refused…); never a secret.
    var error: String?
    var finishedAt: Date

    init(claim: DeliveryClaim, decision: WebhookDeliveryDecision, responseStatus: Int?, error: String?, finishedAt: Date) {
        self.claim = claim
        switch decision {
        case .delivered: (status, nextAttemptAt) = (.delivered, nil)
        case .retry(let at): (status, nextAttemptAt) = (.pending, at)
        case .failed: (status, nextAttemptAt) = (.failed, nil)
        }
        self.responseStatus = responseStatus
        self.error = error
        self.finishedAt = finishedAt
    }
}

/// One row of `GET /v1/admin/webhooks/deliveries`.
struct DeliveryRow: Sendable, Encodable {
    var eventID: UUID
    var type: String
    var userID: String
    var status: WebhookDeliveryStatus
    var attempts: Int
    var lastAttemptAt: Date?
    var lastResponseStatus: Int?
    var nextAttemptAt: Date?
    var createdAt: Date
    /// The sort key of `next_cursor`.
    var position: Int64

    private enum CodingKeys: String, CodingKey {
        case eventID = "event_id", type, userID = "user_id", status, attempts, lastAttemptAt = "last_attempt_at"
        case lastResponseStatus = "last_response_status", nextAttemptAt = "next_attempt_at", createdAt = "created_at"
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(eventID.lowercasedString, forKey: .eventID)
        try container.encode(type, forKey: .type)
        try container.encode(userID, forKey: .userID)
        try container.encode(status, forKey: .status)
        try container.encode(attempts, forKey: .attempts)
        try container.encode(lastAttemptAt.map(RFC3339.string(from:)), forKey: .lastAttemptAt)
        try container.encode(lastResponseStatus, forKey: .lastResponseStatus)
        try container.encode(nextAttemptAt.map(RFC3339.string(from:)), forKey: .nextAttemptAt)
        try container.encode(RFC3339.string(from: createdAt), forKey: .createdAt)
    }
}

/// What `GET /v1/admin/webhooks/deliveries` and the redeliver route use: ``WebhookDeliveryStore``, or a stand-in
/// where a route test runs without PostgreSQL.
@Loop
protocol WebhookDeliveryReading: Sendable {
    /// At most `limit` deliveries newest first, older than `before` (a position) when given.
    func deliveries(status: WebhookDeliveryStatus?, userID: String?, limit: Int, before: Int64?,
                    on db: some PostgresQueryable) async throws -> [DeliveryRow]
    /// Makes the event pending again, due at `now`, with a fresh retry window; false when there is no such event.
    func redeliver(_ eventID: UUID, now: Date, on db: some PostgresQueryable) async throws -> Bool
}

/// The delivery side of `webhook_events`: due events claimed with `FOR UPDATE SKIP LOCKED` under a lease (the
/// lease is the next attempt time, so a claimed event is not due again until it ends), each attempt's outcome,
/// the deliveries list and redelivery.
@Loop
struct WebhookDeliveryStore: WebhookDeliveryReading {
    /// Claims up to `limit` events due at `now`, oldest due first, each until `now + leaseMs`; an event only when
    /// no earlier event of its user is pending and due, or being sent (migration 0019), so that a user's events reach
    /// a receiver that answers in sequence order, one at a time; an earlier one waiting for a later retry (its
    /// receiver refused it) holds none back.
    func claimDue(limit: Int, now: Date, leaseMs: Int, on db: some PostgresQueryable) async throws -> [DeliveryClaim] {
        try await db.query("""
            UPDATE webhook_events e
               SET claim_id = gen_random_uuid(), next_attempt_at = $1 + $3 * interval '1 millisecond',
                   attempts = e.attempts + 1, last_attempt_at = $1
              FROM (SELECT event_id FROM webhook_events w
                     WHERE delivery_status = 'pending' AND next_attempt_at <= $1
                       AND NOT EXISTS (SELECT 1 FROM webhook_events o
                                        WHERE o.user_id = w.user_id AND o.sequence < w.sequence AND o.delivery_status = 'pending'
                                          AND (o.next_attempt_at <= $1 OR o.claim_id IS NOT NULL))
                     ORDER BY next_attempt_at
                     LIMIT $2
                     FOR UPDATE SKIP LOCKED) due
             WHERE e.event_id = due.event_id
            RETURNING e.event_id, e.claim_id, e.payload, e.attempts - e.attempts_before_round AS round_attempt, e.pending_since
            """, [now, limit, leaseMs]).rows.map { row in
            DeliveryClaim(eventID: try row.uuid("event_id"), claimID: try row.uuid("claim_id"), payload: try row.string("payload"),
                          attempt: try row.int("round_attempt"), pendingSince: try row.date("pending_since"))
        }
    }

    /// Records how each attempt ended and what follows, in one statement; an outcome whose claim is no longer
    /// current (its lease ended and another claim took the event, or it was redelivered meanwhile) changes nothing.
    func record(_ outcomes: [DeliveryOutcome], on db: some PostgresQueryable) async throws {
        guard !outcomes.isEmpty else { return }
        _ = try await db.query("""
            UPDATE webhook_events e
               SET delivery_status = x.status, next_attempt_at = x.next_attempt_at, claim_id = NULL,
                   last_response_status = x.response_status, last_error = x.error,
                   delivered_at = CASE WHEN x.status = 'delivered' THEN x.finished_at ELSE e.delivered_at END
              FROM unnest($1::uuid[], $2::uuid[], $3::text[], $4::timestamptz[], $5::bigint[], $6::text[], $7::timestamptz[])
                   AS x (event_id, claim_id, status, next_attempt_at, response_status, error, finished_at)
             WHERE e.event_id = x.event_id AND e.claim_id = x.claim_id
            """, [outcomes.map(\.claim.eventID), outcomes.map(\.claim.claimID), outcomes.map(\.status.rawValue),
                  outcomes.map(\.nextAttemptAt), outcomes.map(\.responseStatus), outcomes.map(\.error), outcomes.map(\.finishedAt)])
    }

    /// Gives claims back unsent (shutdown): due again at `now`. Claims whose outcome was recorded are not held
    /// any more and stay as recorded.
    func release(_ claims: [DeliveryClaim], now: Date, on db: some PostgresQueryable) async throws {
        guard !claims.isEmpty else { return }
        _ = try await db.query("UPDATE webhook_events SET next_attempt_at = $2, claim_id = NULL WHERE claim_id = ANY($1)",
                               [claims.map(\.claimID), now])
    }

    func deliveries(status: WebhookDeliveryStatus?, userID: String?, limit: Int, before: Int64?,
                    on db: some PostgresQueryable) async throws -> [DeliveryRow] {
        // Only the filters asked for, so an index on (filter, position) serves the order and the cursor.
        var conditions: [String] = []
        var parameters: [any PostgresEncodable] = []
        func bind(_ value: any PostgresEncodable) -> String {
            parameters.append(value)
            return "$\(parameters.count)"
        }
        if let status { conditions.append("delivery_status = \(bind(status.rawValue))") }
        if let userID { conditions.append("user_id = \(bind(userID))") }
        if let before { conditions.append("position < \(bind(before))") }
        let filter = conditions.isEmpty ? "" : "WHERE " + conditions.joined(separator: " AND ")
        return try await db.query("""
            SELECT event_id, type, user_id, delivery_status, attempts, last_attempt_at, last_response_status,
                   next_attempt_at, created_at, position
              FROM webhook_events
             \(filter)
             ORDER BY position DESC
             LIMIT \(bind(limit))
            """, parameters).rows.map { row in
            DeliveryRow(eventID: try row.uuid("event_id"), type: try row.string("type"), userID: try row.string("user_id"),
                        status: WebhookDeliveryStatus(rawValue: try row.string("delivery_status")) ?? .none,
                        attempts: try row.int("attempts"), lastAttemptAt: try row.optionalDate("last_attempt_at"),
                        lastResponseStatus: try row.optionalInt("last_response_status"),
                        nextAttemptAt: try row.optionalDate("next_attempt_at"), createdAt: try row.date("created_at"),
                        position: try row.int64("position"))
        }
    }

    func redeliver(_ eventID: UUID, now: Date, on db: some PostgresQueryable) async throws -> Bool {
        try await db.query("""
            UPDATE webhook_events
               SET delivery_status = 'pending', pending_since = $2, next_attempt_at = $2, claim_id = NULL,
                   attempts_before_round = attempts
             WHERE event_id = $1
            RETURNING event_id
            """, [eventID, now]).rows.count == 1
    }
}

extension DeliveryRow: PageItem {
    static let listKey = "deliveries"
}
