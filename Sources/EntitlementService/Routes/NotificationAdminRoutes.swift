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
        let (limit, cursor) = try AdminInput.page(request)
        let type = try request.query["type"].map { try InputRules.token($0, field: "type", maxLength: 64) }
        return .json(try await NotificationStore().page(.init(limit: limit, cursor: cursor, type: type), on: db))
    }
}
