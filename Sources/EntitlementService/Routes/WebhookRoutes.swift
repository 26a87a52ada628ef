import ServiceRuntime
import EntitlementModel
import Foundation

/// The admin routes of webhook deliveries: the list, newest first and paged, and redelivery of one event.
/// Registered under `/v1/admin` (an admin key).
@Loop
struct WebhookRoutes {
    let db: PostgresPool
    /// False without `WEBHOOK_URL`: nothing is sent, so nothing can be sent again.
    let delivers: Bool
    /// The deliveries' reads and redelivery; a stand-in lets a route test run without PostgreSQL.
    var deliveries: any WebhookDeliveryReading = WebhookDeliveryStore()

    func register(on admin: RouterGroup) {
        admin.get("/webhooks/deliveries") { request, _ in try await list(request) }
        admin.post("/webhooks/events/{event_id}/redeliver") { request, context in try await redeliver(request, context) }
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
        return .json(PageBody(items: page, nextCursor: next))
    }

    private func redeliver(_ request: HTTPRequest, _ context: HTTPRequestContext) async throws -> HTTPResponse {
        let missing = ResourceID.notFound("webhook event", field: "event_id")
        let id = try ResourceID.named("event_id", in: context.parameters, missing: missing)
        guard delivers else {
            throw ProblemError(status: 409, title: "Webhooks not configured",
                               detail: "WEBHOOK_URL is not set: events are recorded, not sent.")
        }
        guard try await deliveries.redeliver(id, now: Date(), on: db) else { throw missing }
        let text = id.lowercasedString
        Log.info("webhook_redeliver", ["event_id": text])
        return .json(["event_id": text, "status": WebhookDeliveryStatus.pending.rawValue], status: 202)
    }
}
