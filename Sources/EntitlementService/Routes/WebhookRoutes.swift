import ServiceRuntime
import EntitlementModel
import Foundation

/// The admin routes of webhook deliveries: the list, newest first and paged, and redelivery of one event.
@Loop
struct WebhookRoutes {
    let keys: APIKeys
    let db: PostgresPool
    /// False without `WEBHOOK_URL`: nothing is sent, so nothing can be sent again.
    let delivers: Bool
    /// The deliveries' reads and redelivery; a stand-in lets a route test run without PostgreSQL.
    var deliveries: any WebhookDeliveryReading = WebhookDeliveryStore()

    func register(on router: Router) {
        router.get("/v1/admin/webhooks/deliveries") { request in
            _ = try keys.authorize(request, admin: true)
            return try await list(request)
        }
        router.post("/v1/admin/webhooks/events/{event_id}/redeliver") { request in
            _ = try keys.authorize(request, admin: true)
            return try await redeliver(request)
        }
    }

    private struct ListBody: Encodable {
        var deliveries: [DeliveryRow]
        var nextCursor: String?
        enum CodingKeys: String, CodingKey { case deliveries, nextCursor = "next_cursor" }

        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(deliveries, forKey: .deliveries)
            try container.encode(nextCursor, forKey: .nextCursor)
        }
    }

    private func list(_ request: HTTPRequest) async throws -> HTTPResponse {
        let limit = try InputRules.queryInt(request, "limit", in: 1...500, default: 50)
        let cursor = try InputRules.queryCursor(request, "cursor")
        let userID = try request.query["user_id"].map { try InputRules.userID($0) }
        let status = try request.query["status"].map { text in
            guard let status = WebhookDeliveryStatus(rawValue: text) else {
                throw ProblemError.badRequest("'status' must be pending, delivered, failed or none.", field: "status")
            }
            return status
        }
        let rows = try await deliveries.deliveries(status: status, userID: userID, limit: limit + 1, before: cursor?.number, on: db)
        let page = Array(rows.prefix(limit))
        let next = rows.count > limit ? page.last.map { PageCursor(number: $0.position).text } : nil
        return .json(ListBody(deliveries: page, nextCursor: next))
    }

    private func redeliver(_ request: HTTPRequest) async throws -> HTTPResponse {
        let id = try InputRules.uuid(request.pathParameters["event_id"] ?? "", field: "event_id")
        guard delivers else {
            throw ProblemError(status: 409, title: "Webhooks not configured",
                               detail: "WEBHOOK_URL is not set: events are recorded, not sent.")
        }
        guard let uuid = UUID(uuidString: id), try await deliveries.redeliver(uuid, now: Date(), on: db) else {
            throw ProblemError(status: 404, detail: "No webhook event has this event_id.")
        }
        Log.info("webhook_redeliver", ["request_id": request.requestID, "event_id": id])
        return .json(["event_id": id, "status": WebhookDeliveryStatus.pending.rawValue], status: 202)
    }
}
