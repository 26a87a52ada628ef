import ServiceRuntime
import Foundation

/// `GET /v1/admin/users/{user_id}`, the customer view (see ``CustomerViewBody``), under `/v1/admin` (an admin key).
/// Query: `transactions_limit` (1–500, default 100) and `transactions_cursor`, `events_limit` (1–500, default 50)
/// and `events_cursor`.
@Loop
struct CustomerRoutes {
    let view: CustomerView

    func register(on admin: RouterGroup) {
        admin.get("/users/{user_id}") { request, context in
            let userID = try context.parameters.require("user_id", as: UserID.self).value
            return .json(try await view.body(
                userID: userID, now: Date(),
                transactionLimit: try InputRules.queryInt(request, "transactions_limit", in: 1...500, default: 100),
                transactionCursor: try InputRules.queryCursor(request, "transactions_cursor"),
                eventLimit: try InputRules.queryInt(request, "events_limit", in: 1...500, default: 50),
                eventCursor: try InputRules.queryCursor(request, "events_cursor")))
        }
    }
}
