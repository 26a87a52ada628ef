import ServiceRuntime
import EntitlementModel
import Foundation

/// Where a stored notification stands.
enum NotificationState: String, Sendable {
    /// Stored, not applied yet: the request that stored it applies it, else the apply worker.
    case received
    /// Recorded for its purchase's owner (even if nothing changed).
    case applied
    /// Its purchase has no owner yet: kept until one appears.
    case parked
    /// Nothing to apply (TEST, summaries, external purchase tokens).
    case ignored
}

/// A notification as stored: verified, then inserted (`received`, or `ignored` when there is nothing to apply),
/// later taken up to be applied.
struct StoredNotification: Sendable {
    /// V2: Apple's `notificationUUID`; V1: `v1:` and the SHA-256 of the body.
    var uuid: String
    var version: Int
    var type: String
    var subtype: String?
    /// V2: the notification's `signedDate`; V1: when it was received.
    var signedDate: Date
    var environment: String?
    var originalTransactionID: String?
    var transactionID: String?
    /// V2: the `signedPayload` as received; V1: the body without its password.
    var signedPayload: String
    /// V2: the verified payloads of the signed transaction and renewal info.
    var transactionInfo: Data?
    var renewalInfo: Data?
    var state: NotificationState
    /// Attempts to apply it so far (the worker's backoff grows with them).
    var attempts = 0
}

/// The `app_store_notifications` table: every notification stored before it is answered, once per
/// `notification_uuid`, then applied (or parked, or ignored) under a row lock, and listed for admins.
@Loop
struct NotificationStore {
    private static let columns = """
        notification_uuid, version, notification_type, subtype, signed_date, environment, original_transaction_id,
        transaction_id, signed_payload, transaction_info::text AS transaction_info, renewal_info::text AS renewal_info, state, attempts
        """

    /// Stores `notification` unless one with its uuid is stored already; true when this call stored it. A
    /// `received` one is not due for the worker before `lease` has passed: the caller applies it first.
    func insert(_ notification: StoredNotification, lease: Duration, on db: some PostgresQueryable) async throws -> Bool {
        !(try await db.query("""
            INSERT INTO app_store_notifications (
                notification_uuid, version, notification_type, subtype, signed_date, environment, original_transaction_id,
                transaction_id, signed_payload, transaction_info, renewal_info, state, next_attempt_at)
            VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, now() + $13)
            ON CONFLICT (notification_uuid) DO NOTHING
            RETURNING notification_id
            """, [notification.uuid, notification.version, notification.type, notification.subtype, notification.signedDate,
                  notification.environment, notification.originalTransactionID, notification.transactionID,
                  notification.signedPayload, notification.transactionInfo.map(PostgresJSON.init),
                  notification.renewalInfo.map(PostgresJSON.init), notification.state.rawValue, lease]).rows.isEmpty)
    }

    /// The notification `uuid` while it is still `received`, last, after the notifications of its purchase that are
    /// still `received` and were signed before it (or at the same instant and stored before it), oldest signed
    /// first; every row locked until the caller's transaction ends. Empty when `uuid` is no longer `received`.
    func lockReceived(upTo uuid: String, on db: some PostgresQueryable) async throws -> [StoredNotification] {
        let rows = try await db.query("""
            SELECT \(Self.columns) FROM app_store_notifications
             WHERE state = 'received'
               AND (notification_uuid = $1
                    OR original_transaction_id = (SELECT original_transaction_id FROM app_store_notifications WHERE notification_uuid = $1)
                       AND (signed_date, notification_id) < (SELECT signed_date, notification_id FROM app_store_notifications WHERE notification_uuid = $1))
             ORDER BY signed_date, notification_id
               FOR UPDATE
            """, [uuid]).rows.map(Self.stored)
        return rows.last?.uuid == uuid ? rows : []
    }

    /// The parked notifications of `originalTransactionID`, oldest signed first, their rows locked.
    func lockParked(of originalTransactionID: String, on db: some PostgresQueryable) async throws -> [StoredNotification] {
        try await db.query("""
            SELECT \(Self.columns) FROM app_store_notifications
             WHERE original_transaction_id = $1 AND state = 'parked'
             ORDER BY signed_date, notification_id
               FOR UPDATE
            """, [originalTransactionID]).rows.map(Self.stored)
    }

    /// Marks a notification applied for `userID`, or parked when it has no owner yet (`userID` nil).
    func settle(_ uuid: String, owner userID: String?, on db: some PostgresQueryable) async throws {
        _ = try await db.query("""
            UPDATE app_store_notifications
               SET state = CASE WHEN $2::text IS NULL THEN 'parked' ELSE 'applied' END, user_id = $2,
                   applied_at = CASE WHEN $2::text IS NULL THEN NULL ELSE now() END, last_error = NULL, updated_at = now()
             WHERE notification_uuid = $1
            """, [uuid, userID])
    }

    /// Claims up to `limit` due `received` notifications, oldest signed first, skipping rows other instances
    /// hold; a claimed one is not due again before `lease` has passed.
    func claimDue(limit: Int, lease: Duration, on db: some PostgresQueryable) async throws -> [StoredNotification] {
        try await db.query("""
            WITH due AS (
                SELECT notification_id FROM app_store_notifications
                 WHERE state = 'received' AND next_attempt_at <= now()
                 ORDER BY signed_date, notification_id LIMIT $1
                   FOR UPDATE SKIP LOCKED)
            UPDATE app_store_notifications n
               SET attempts = n.attempts + 1, next_attempt_at = now() + $2,
                   updated_at = now()
              FROM due WHERE n.notification_id = due.notification_id
            RETURNING \(Self.columns)
            """, [limit, lease]).rows.map(Self.stored).sorted { $0.signedDate < $1.signedDate }
    }

    /// After a failed attempt: due again after `delay`, with the error kept for the operator.
    func retryLater(_ uuid: String, delay: Duration, error: String, on db: some PostgresQueryable) async throws {
        _ = try await db.query("""
            UPDATE app_store_notifications
               SET next_attempt_at = now() + $2, last_error = $3, updated_at = now()
             WHERE notification_uuid = $1 AND state = 'received'
            """, [uuid, delay, error])
    }

    /// When the newest notification of `environment` was received; nil when none was.
    func lastReceived(in environment: String, on db: some PostgresQueryable) async throws -> Date? {
        try await db.query("""
            SELECT max(received_at) AS last FROM app_store_notifications WHERE environment = $1
            """, [environment]).rows.first?.optionalDate("last")
    }

    /// What `GET /v1/admin/notifications` asks for: at most `limit` notifications received before `cursor`
    /// (the newest when nil), optionally only those of `type`.
    struct Query: Sendable {
        var limit: Int
        var cursor: AuditCursor?
        var type: String?
    }

    /// One page, newest received first, and the cursor of the next older page when there is one.
    func page(_ query: Query, on db: some PostgresQueryable) async throws -> PageBody<NotificationBody> {
        let rows = try await db.query("""
            SELECT notification_id, (extract(epoch FROM received_at) * 1000000)::bigint AS received_us, notification_uuid,
                   version, notification_type, subtype, signed_date, received_at, environment, original_transaction_id,
                   transaction_id, user_id, state
              FROM app_store_notifications
             WHERE ($1::bigint IS NULL
                    OR (received_at, notification_id) < (timestamptz 'epoch' + $1::bigint * interval '1 microsecond', $2::bigint))
               AND ($3::text IS NULL OR notification_type = $3)
             ORDER BY received_at DESC, notification_id DESC
             LIMIT $4
            """, [query.cursor?.occurredMicroseconds, query.cursor?.eventID, query.type, query.limit + 1]).rows
        let page = rows.prefix(query.limit)
        var next: AuditCursor?
        if rows.count > query.limit, let last = page.last {
            next = AuditCursor(occurredMicroseconds: try last.int64("received_us"), eventID: try last.int64("notification_id"))
        }
        return PageBody(items: try page.map(NotificationBody.init(row:)), nextCursor: next?.text)
    }

    private static func stored(_ row: PostgresRow) throws -> StoredNotification {
        StoredNotification(
            uuid: try row.string("notification_uuid"), version: try row.int("version"), type: try row.string("notification_type"),
            subtype: try row.optionalString("subtype"), signedDate: try row.date("signed_date"),
            environment: try row.optionalString("environment"), originalTransactionID: try row.optionalString("original_transaction_id"),
            transactionID: try row.optionalString("transaction_id"), signedPayload: try row.string("signed_payload"),
            transactionInfo: try row.optionalString("transaction_info").map { Data($0.utf8) },
            renewalInfo: try row.optionalString("renewal_info").map { Data($0.utf8) },
            state: NotificationState(rawValue: try row.string("state")) ?? .received, attempts: try row.int("attempts"))
    }
}

/// One notification of `GET /v1/admin/notifications`.
struct NotificationBody: Encodable {
    var uuid: String
    var version: Int
    var type: String
    var subtype: String?
    var signedDate: Date
    var receivedAt: Date
    var environment: String?
    var originalTransactionID: String?
    var transactionID: String?
    var userID: String?
    var state: String

    init(row: PostgresRow) throws {
        uuid = try row.string("notification_uuid")
        version = try row.int("version")
        type = try row.string("notification_type")
        subtype = try row.optionalString("subtype")
        signedDate = try row.date("signed_date")
        receivedAt = try row.date("received_at")
        environment = try row.optionalString("environment")
        originalTransactionID = try row.optionalString("original_transaction_id")
        transactionID = try row.optionalString("transaction_id")
        userID = try row.optionalString("user_id")
        state = try row.string("state")
    }

    enum CodingKeys: String, CodingKey {
        case uuid = "notification_uuid", version, type = "notification_type", subtype, signedDate = "signed_date"
        case receivedAt = "received_at", environment, originalTransactionID = "original_transaction_id"
        case transactionID = "transaction_id", userID = "user_id", state
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(uuid, forKey: .uuid)
        try container.encode(version, forKey: .version)
        try container.encode(type, forKey: .type)
        try container.encode(subtype, forKey: .subtype)
        try container.encode(RFC3339.string(from: signedDate), forKey: .signedDate)
        try container.encode(RFC3339.string(from: receivedAt), forKey: .receivedAt)
        try container.encode(environment, forKey: .environment)
        try container.encode(originalTransactionID, forKey: .originalTransactionID)
        try container.encode(transactionID, forKey: .transactionID)
        try container.encode(userID, forKey: .userID)
        try container.encode(state, forKey: .state)
    }
}

extension NotificationBody: PageItem {
    static let listKey = "notifications"
}
