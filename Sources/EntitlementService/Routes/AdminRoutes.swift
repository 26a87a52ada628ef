import ServiceRuntime
import EntitlementModel
import Foundation

/// The admin routes: grants, the catalog, the audit log and the purchase report. Every one needs an admin
/// key (401 without a valid key, 403 for an app key) and records who acted by key id, never by key.
@Loop
struct AdminRoutes {
    let keys: APIKeys
    let db: PostgresPool
    let catalog: CatalogCache
    let events: EventRecorder
    /// The audit log's reads; a stand-in lets a route test run without PostgreSQL.
    var audit: any AuditReading = AuditStore()
    /// The purchase report's reads; a stand-in lets a route test run without PostgreSQL.
    var report: any ReportReading = ReportStore()

    func register(on router: Router) {
        let grants = GrantEditor(db: db, events: events)
        let editor = CatalogEditor(db: db, catalog: catalog)
        router.post("/v1/admin/users/{user_id}/grants") { request in try await admin(request) { try await createGrant($0, request, grants) } }
        router.delete("/v1/admin/grants/{grant_id}") { request in try await admin(request) { try await revokeGrant($0, request, grants) } }
        router.put("/v1/admin/products/{product_id}") { request in try await admin(request) { try await putProduct($0, request, editor) } }
        router.get("/v1/admin/products") { request in try await admin(request) { _ in .json(try await catalog.current()) } }
        router.get("/v1/admin/audit") { request in try await admin(request) { _ in try await listAudit(request, audit) } }
        router.get("/v1/admin/reports/purchases") { request in try await admin(request) { _ in try await purchaseReport(request, report) } }
    }

    /// Authorises an admin, then runs `body`.
    private func admin(_ request: HTTPRequest, _ body: (Caller) async throws -> HTTPResponse) async throws -> HTTPResponse {
        try await body(try keys.authorize(request, admin: true))
    }

    private struct GrantBody: Decodable {
        var entitlement: String
        var expiresAt: String?
        var duration: String?
        var reason: String
        enum CodingKeys: String, CodingKey { case entitlement, expiresAt = "expires_at", duration, reason }
    }

    private func createGrant(_ caller: Caller, _ request: HTTPRequest, _ grants: GrantEditor) async throws -> HTTPResponse {
        let userID = try InputRules.userID(request.pathParameters["user_id"] ?? "")
        let body = try request.decodeJSON(GrantBody.self)
        let entitlement = try AdminInput.text(body.entitlement, field: "entitlement", maxLength: 255)
        let reason = try AdminInput.text(body.reason, field: "reason", maxLength: 1_000, multiline: true)
        let now = Date()
        let expiresAt: Date?
        switch (body.expiresAt, body.duration) {
        case (_?, _?):
            throw ProblemError.badRequest("Give 'expires_at' or 'duration', not both (neither makes a lifetime grant).", field: "duration")
        case (let text?, nil):
            expiresAt = try AdminInput.instant(text, field: "expires_at")
        case (nil, let text?):
            expiresAt = try AdminInput.duration(text, field: "duration", from: GrantStore.wholeSecond(now))
        case (nil, nil):
            expiresAt = nil
        }
        let record = try await grants.create(userID: userID, entitlement: entitlement, expiresAt: expiresAt, reason: reason,
                                             actor: caller.keyID, now: now)
        Log.info("grant_created", ["request_id": request.requestID, "grant_id": record.grant.id, "actor": caller.keyID])
        return .json(record, status: 201)
    }

    private func revokeGrant(_ caller: Caller, _ request: HTTPRequest, _ grants: GrantEditor) async throws -> HTTPResponse {
        let id = try InputRules.uuid(request.pathParameters["grant_id"] ?? "", field: "grant_id")
        guard let record = try await grants.revoke(id: id, actor: caller.keyID, now: Date()) else {
            throw ProblemError(status: 404, detail: "No grant has this grant_id.")
        }
        Log.info("grant_revoked", ["request_id": request.requestID, "grant_id": id, "actor": caller.keyID])
        return .json(record)
    }

    private func putProduct(_ caller: Caller, _ request: HTTPRequest, _ editor: CatalogEditor) async throws -> HTTPResponse {
        let pathID = request.pathParameters["product_id"] ?? ""
        var fields = try request.decodeJSON([String: JSONValue].self)
        switch fields["product_id"] {
        case nil, .string(pathID)?:
            fields["product_id"] = .string(pathID)
        default:
            throw ProblemError.badRequest("'product_id' in the body must be the path's product id, or be left out.", field: "product_id")
        }
        let product: Product
        do {
            product = try Product(json: Data(JSONValue.object(fields).jsonText.utf8))
        } catch {
            throw error.field.isEmpty
                ? ProblemError.badRequest("The product is invalid: \(error.reason).")
                : ProblemError.badRequest("'\(error.field)' \(error.reason).", field: error.field)
        }
        let created = try await editor.put(product, actor: caller.keyID)
        Log.info("product_put", ["request_id": request.requestID, "product_id": product.productID, "created": created, "actor": caller.keyID])
        return .json(product, status: created ? 201 : 200)
    }

    private func listAudit(_ request: HTTPRequest, _ audit: any AuditReading) async throws -> HTTPResponse {
        let limit = try InputRules.queryInt(request, "limit", in: 1...500, default: 50)
        let cursor = try request.query["cursor"].map { text in
            guard let cursor = AuditCursor(text: text) else {
                throw ProblemError.badRequest("'cursor' must be a next_cursor this service answered.", field: "cursor")
            }
            return cursor
        }
        let userID = try request.query["user_id"].map { try InputRules.userID($0) }
        let action = try request.query["action"].map { try AdminInput.action($0) }
        return .json(try await audit.page(AuditQuery(limit: limit, cursor: cursor, userID: userID, action: action), on: db))
    }

    private func purchaseReport(_ request: HTTPRequest, _ report: any ReportReading) async throws -> HTTPResponse {
        let window = try AdminInput.reportWindow(request, now: Date())
        let environment = try AdminInput.queryEnvironment(request)
        return .json(try await report.purchases(from: window.from, to: window.to, environment: environment, on: db))
    }
}
