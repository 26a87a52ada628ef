import ServiceRuntime
import Foundation

/// `GET /v1/admin/notifications`: the App Store notifications received, newest first, paged as the audit log.
@Loop
struct NotificationAdminRoutes {
    let keys: APIKeys
    let db: PostgresPool

    func register(on router: Router) {
        router.get("/v1/admin/notifications") { try await list($0) }
    }

    private func list(_ request: HTTPRequest) async throws -> HTTPResponse {
        _ = try keys.authorize(request, admin: true)
        let limit = try InputRules.queryInt(request, "limit", in: 1...500, default: 50)
        let cursor = try request.query["cursor"].map { text in
            guard let cursor = AuditCursor(text: text) else {
                throw ProblemError.badRequest("'cursor' must be a next_cursor this service answered.", field: "cursor")
            }
            return cursor
        }
        let type = try request.query["type"].map { try InputRules.token($0, field: "type", maxLength: 64) }
        return .json(try await NotificationStore().page(.init(limit: limit, cursor: cursor, type: type), on: db))
    }
}
