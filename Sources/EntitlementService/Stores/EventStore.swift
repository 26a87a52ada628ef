import ServiceRuntime
import EntitlementModel
import Foundation

/// A user's row of `user_event_heads` as a writing transaction holds it (locked until it ends).
struct EventHead: Sendable {
    var userID: String
    /// The sequence of the user's last event (0 before the first).
    var lastSequence: Int
    /// The state the last write left (as GET entitlements shows it); nil when none was ever recorded.
    var state: EntitlementState?
    /// When that state next changes with time alone; nil when nothing is due.
    var nextChangeAt: Date?
    /// A catalog change of this product may have changed the state since it was written (`""`: changes of
    /// several products); the next evaluation names it as the cause. Cleared when the head is written.
    var pendingCatalogChange: String? = nil
}

/// One event of the customer view: its body as sent, and where its delivery stands.
struct StoredEvent: Sendable {
    var sequence: Int
    var payload: String
    var delivery: WebhookDeliveryStatus
}

/// The `user_event_heads` and `webhook_events` tables' writing side: per-user heads (sequence, last state, next
/// change), locked by every transaction that changes a user's state, and the events written in that
/// transaction; the expiration worker's claims of due heads; a user's events for the customer view.
@Loop
struct EventStore {
    /// Locks the heads of `userIDs`, creating those missing, in user-id order (every writer locks in that order,
    /// so two writers of the same users cannot deadlock here).
    func lockHeads(_ userIDs: [String], on connection: PostgresConnection) async throws -> [EventHead] {
        let users = Array(Set(userIDs)).sorted()
        // One round trip: the lock reads the rows the insert before it made.
        let results = try await connection.pipeline([
            PostgresStatement("""
                INSERT INTO user_event_heads (user_id)
                SELECT u FROM unnest($1::text[]) AS u ORDER BY u
                ON CONFLICT (user_id) DO NOTHING
                """, [users]),
            PostgresStatement("""
                SELECT user_id, last_sequence, state::text AS state, next_change_at, pending_catalog_change FROM user_event_heads
                 WHERE user_id = ANY($1)
                 ORDER BY user_id
                 FOR UPDATE
                """, [users]),
        ])
        return try results[1].rows.map(Self.head)
    }

    /// Locks up to `limit` heads whose next change is at or before `now`, skipping those another transaction
    /// holds, soonest first.
    func claimDueHeads(limit: Int, now: Date, on db: some PostgresQueryable) async throws -> [EventHead] {
        try await db.query("""
            SELECT user_id, last_sequence, state::text AS state, next_change_at, pending_catalog_change FROM user_event_heads
             WHERE next_change_at <= $1
             ORDER BY next_change_at
             LIMIT $2
             FOR UPDATE SKIP LOCKED
            """, [now, limit]).rows.map(Self.head)
    }

    /// Marks the heads of those of `userIDs` that hold a state as due at `now`, changed by the catalog entry of
    /// `productID` (kept when it is the only one waiting, else `""`). Returns how many were marked.
    func markCatalogChanged(_ userIDs: [String], productID: String, now: Date, on db: some PostgresQueryable) async throws -> Int {
        guard !userIDs.isEmpty else { return 0 }
        return try await db.query("""
            WITH marked AS (
                UPDATE user_event_heads
                   SET next_change_at = LEAST(next_change_at, $3),  -- LEAST skips a NULL
                       pending_catalog_change = CASE WHEN coalesce(pending_catalog_change, $2) = $2 THEN $2 ELSE '' END
                 WHERE user_id = ANY($1) AND state IS NOT NULL
                RETURNING 1)
            SELECT count(*)::int AS marked FROM marked
            """, [userIDs.sorted(), productID, now]).rows[0].int("marked")
    }

    /// Stores `heads` (their sequences, states and next changes) back in one statement, their pending catalog
    /// changes done.
    func updateHeads(_ heads: [EventHead], on db: some PostgresQueryable) async throws {
        guard !heads.isEmpty else { return }
        _ = try await db.query("""
            UPDATE user_event_heads h
               SET last_sequence = u.last_sequence, state = u.state, next_change_at = u.next_change_at,
                   pending_catalog_change = NULL, updated_at = now()
              FROM unnest($1::text[], $2::bigint[], $3::jsonb[], $4::timestamptz[]) AS u(user_id, last_sequence, state, next_change_at)
             WHERE h.user_id = u.user_id
            """, [heads.map(\.userID), heads.map(\.lastSequence), try heads.map { try $0.state.map { try PostgresJSON(encoding: $0) } },
                  heads.map(\.nextChangeAt)])
    }

    /// Inserts `events`, each with its payload (the exact bytes to send), in one statement, their positions in
    /// the order given; `delivery` is `pending` (due at once) or `none`.
    func insert(_ events: [(event: WebhookEvent, payload: String)], delivery: WebhookDeliveryStatus,
                on db: some PostgresQueryable) async throws {
        guard !events.isEmpty else { return }
        let pending = delivery == .pending
        _ = try await db.query("""
            INSERT INTO webhook_events (event_id, user_id, sequence, type, created_at, payload, delivery_status,
                                        pending_since, next_attempt_at)
            SELECT id, user_id, sequence, type, created_at, payload, $7, due, due
              FROM unnest($1::uuid[], $2::text[], $3::bigint[], $4::text[], $5::timestamptz[], $6::text[], $8::timestamptz[])
                   WITH ORDINALITY AS e(id, user_id, sequence, type, created_at, payload, due, n)
             ORDER BY n  -- positions in the order given
            """, [events.map(\.event.id), events.map(\.event.userID), events.map(\.event.sequence), events.map(\.event.change.type.rawValue),
                  events.map(\.event.createdAt), events.map(\.payload), delivery.rawValue,
                  events.map { pending ? $0.event.createdAt : nil }])
    }

    /// The user's events newest first: at most `limit`, with a sequence below `before` when given.
    func events(of userID: String, limit: Int, before: Int?, on db: some PostgresQueryable) async throws -> [StoredEvent] {
        try await db.query("""
            SELECT sequence, payload, delivery_status FROM webhook_events
             WHERE user_id = $1 AND sequence < $2
             ORDER BY sequence DESC
             LIMIT $3
            """, [userID, before ?? Int.max, limit]).rows.map { row in
            StoredEvent(sequence: try row.int("sequence"), payload: try row.string("payload"),
                        delivery: WebhookDeliveryStatus(rawValue: try row.string("delivery_status")) ?? .none)
        }
    }

    private static func head(_ row: PostgresRow) throws -> EventHead {
        let state = try row.optionalString("state").map {
            try JSONDecoder().decode(EntitlementState.self, from: Data($0.utf8))
        }
        return EventHead(userID: try row.string("user_id"), lastSequence: try row.int("last_sequence"), state: state,
                         nextChangeAt: try row.optionalDate("next_change_at"),
                         pendingCatalogChange: try row.optionalString("pending_catalog_change"))
    }
}
