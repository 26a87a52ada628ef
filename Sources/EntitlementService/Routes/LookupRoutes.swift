import ServiceRuntime

/// `GET /v1/admin/lookup?original_transaction_id=|transaction_id=|order_id=|app_account_token=` (exactly one):
/// `{"user_id"}` of the customer it belongs to, or 404 naming the field. Registered under `/v1/admin` (an admin
/// key). The console finds a customer with it, then opens `GET /v1/admin/users/{user_id}`.
@Loop
struct LookupRoutes {
    let lookup: CustomerLookup

    func register(on admin: RouterGroup) {
        admin.get("/lookup") { request, _ in
            let key = try CustomerKey(query: request.query)
            guard let userID = try await lookup.user(key) else {
                throw ProblemError(status: 404, detail: Self.notFound(key), extra: ["field": .string(key.field)])
            }
            return .json(["user_id": userID])
        }
    }

    private static func notFound(_ key: CustomerKey) -> String {
        switch key {
        case .originalTransactionID, .transactionID: "No user owns a purchase with this \(key.field)."
        case .orderID: "No order has this order_id."
        case .appAccountToken: "This service issued no such app_account_token."
        }
    }
}
