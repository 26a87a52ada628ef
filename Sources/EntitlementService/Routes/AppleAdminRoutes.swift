import ServiceRuntime
import EntitlementModel
import Foundation

/// The admin routes that ask the App Store Server API: attaching a purchase by its App Store order ID and
/// re-reading a user's purchases. Both need an admin key, answer 501 without an API key configured, wait
/// for Apple at most `?wait_ms=` (0–30000, default 10000) and answer the user's entitlements document.
@Loop
struct AppleAdminRoutes {
    let sync: AppleAccountSync?
    let reader: EntitlementReader

    /// Registers the routes on the `/v1/admin` group (its middleware wants an admin key).
    func register(on admin: RouterGroup) {
        admin.post("/users/{user_id}/apple-orders") { request, context in try await attachOrder(request, context) }
        admin.post("/users/{user_id}/refresh") { request, context in try await refresh(request, context) }
    }

    private struct OrderBody: Decodable {
        var orderID: String
        enum CodingKeys: String, CodingKey { case orderID = "order_id" }
    }

    private func attachOrder(_ request: HTTPRequest, _ context: HTTPRequestContext) async throws -> HTTPResponse {
        let (caller, userID, sync, waitMs) = try prepare(request, context)
        let body = try request.decodeJSON(OrderBody.self)
        guard (1...64).contains(body.orderID.utf8.count), body.orderID.unicodeScalars.allSatisfy({ $0.isASCII && $0.properties.isAlphabetic || ("0"..."9").contains($0) }) else {
            throw ProblemError.badRequest("'order_id' must be 1 to 64 letters and digits (the order ID on the receipt email).", field: "order_id")
        }
        do {
            let transferredFrom = try await sync.attachOrder(body.orderID, to: userID, waitMs: waitMs, actor: caller.keyID)
            return .json(AttachedOrderBody(document: try await reader.document(userID: userID, at: Date()), transferredFrom: transferredFrom.first))
        } catch let conflict as OwnershipConflict {
            throw ProblemError.ownershipConflict(conflict.originalTransactionID, source: " of this order", outcome: "nothing was moved")
        } catch let failure as AppleReadFailure {
            throw Self.problem(failure)
        }
    }

    private func refresh(_ request: HTTPRequest, _ context: HTTPRequestContext) async throws -> HTTPResponse {
        let (_, userID, sync, waitMs) = try prepare(request, context)
        do {
            _ = try await sync.refresh(userID: userID, waitMs: waitMs)
            return .json(try await reader.document(userID: userID, at: Date()))
        } catch let failure as AppleReadFailure {
            throw Self.problem(failure)
        }
    }

    /// The admin caller, the path's user, the Server API (501 without a key) and the wait.
    private func prepare(_ request: HTTPRequest, _ context: HTTPRequestContext) throws -> (Caller, String, AppleAccountSync, Int) {
        let caller = try context.caller
        let userID = try context.parameters.require("user_id", as: UserID.self).value
        let waitMs = try InputRules.queryInt(request, "wait_ms", in: 0...30_000, default: 10_000)
        guard let sync else {
            throw ProblemError(status: 501, detail: "The App Store Server API is not configured (APPLE_ISSUER_ID, APPLE_KEY_ID, APPLE_PRIVATE_KEY_FILE).")
        }
        return (caller, userID, sync, waitMs)
    }

    /// The problem answering a read that changed nothing: 404 naming `order_id` (only an order can be unknown:
    /// a refresh leaves a purchase neither environment knows as it is), 503 with `Retry-After`, or 502; the 503
    /// and 502 carry `apple_status` where Apple answered an error (`problemFields`), the log keeps the detail.
    private static func problem(_ failure: AppleReadFailure) -> ProblemError {
        let extra = problemFields(failure.appleStatus)
        switch failure {
        case .notFound:
            return ProblemError(status: 404, detail: "Neither the App Store's Production nor its Sandbox environment knows this order ID.",
                                extra: ["field": "order_id"])
        case .unavailable(let seconds, let detail, let appleStatus):
            Log.warning("app_store_server_api_unavailable", ["detail": detail, "retry_after_s": seconds, "apple_status": appleStatus])
            return ProblemError(status: 503, title: "App Store unavailable",
                                detail: "The App Store did not answer in time; nothing was changed. Ask again after Retry-After seconds.",
                                extra: extra, headers: ["Retry-After": String(seconds)])
        // A configuration error: the client logs the episode once (`apple_api_configuration_error`); the access
        // log has each 502.
        case .configuration(.key, _, _):
            return ProblemError(status: 502, title: "App Store configuration error",
                                detail: "The App Store refused the service's API key; nothing was changed.", extra: extra)
        case .configuration(.request, _, let appleStatus):
            return ProblemError(status: 502, title: "App Store configuration error",
                                detail: "The App Store refused the request\(appleStatus.map { " (HTTP \($0))" } ?? ""); nothing was changed.",
                                extra: extra)
        case .refused(let detail, let appleStatus):
            Log.warning("app_store_server_api_refused", ["detail": detail, "apple_status": appleStatus])
            return ProblemError(status: 502, title: "App Store answer refused", detail: "The App Store's answer could not be used; nothing was changed.",
                                extra: extra)
        }
    }

    /// The member a problem of Apple's answer carries: `apple_status`, where Apple answered an error.
    private static func problemFields(_ appleStatus: Int?) -> [String: JSONValue] {
        appleStatus.map { ["apple_status": .int($0)] } ?? [:]
    }
}

/// `POST /v1/admin/users/{user_id}/apple-orders`: the entitlements document, plus `transferred_from` when the
/// purchase moved to this user.
struct AttachedOrderBody: Encodable {
    var document: EntitlementsDocument
    var transferredFrom: String?

    enum CodingKeys: String, CodingKey { case transferredFrom = "transferred_from" }

    func encode(to encoder: any Encoder) throws {
        try document.encode(to: encoder)
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encodeIfPresent(transferredFrom, forKey: .transferredFrom)
    }
}
