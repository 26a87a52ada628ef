import ServiceRuntime
import Foundation

/// `GET /v1/admin/notifications`: the App Store notifications received, newest first, paged as the audit log.
/// Registered under `/v1/admin`, whose middleware wants an admin key.
@Loop
struct NotificationAdminRoutes {
    let db: PostgresPool

    func register(on admin: RouterGroup) {
        admin.get("/notifications") { request, _ in try await list(request) }
    }

    private func list(_ request: HTTPRequest) async throws -> HTTPResponse {
        let (limit, cursor) = try AdminInput.page(request)
        let type = try request.query["type"].map { type in
            guard (1...64).contains(type.utf8.count),
                  type.utf8.allSatisfy({ (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains($0) || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) || $0 == UInt8(ascii: "_") }) else {
                throw ProblemError.badRequest("'type' must be a notification type such as REFUND (1 to 64 of A-Z, 0-9 and _).", field: "type")
            }
            return type
        }
        return .json(try await NotificationStore().page(.init(limit: limit, cursor: cursor, type: type), on: db))
    }
}
