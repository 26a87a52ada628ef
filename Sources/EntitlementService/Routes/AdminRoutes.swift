import ServiceRuntime
import EntitlementModel
import Foundation

/// The admin routes: grants, the catalog, the audit log and the purchase report. Registered under
/// `/v1/admin`, whose middleware wants an admin key (401 without a valid key, 403 for an app key); each records
/// who acted by key id, never by key.
@Loop
struct AdminRoutes {
    let db: PostgresPool
    let catalog: CatalogCache
    let events: EventRecorder
    /// The audit log's reads; a stand-in lets a route test run without PostgreSQL.
    var audit: any AuditReading = AuditStore()
    /// The purchase report's reads; a stand-in lets a route test run without PostgreSQL.
    var report: any ReportReading = ReportStore()

    func register(on admin: RouterGroup) {
        let grants = GrantEditor(db: db, events: events)
        let editor = CatalogEditor(db: db, catalog: catalog)
        admin.post("/users/{user_id}/grants") { request, context in try await createGrant(try context.caller, request, context, grants) }
        admin.delete("/grants/{grant_id}") { request, context in try await revokeGrant(try context.caller, request, context, grants) }
        admin.put("/products/{product_id}") { request, context in try await putProduct(try context.caller, request, context, editor) }
        admin.get("/products") { _, _ in .json(try await catalog.current()) }
        admin.get("/audit") { request, _ in try await listAudit(request, audit) }
        admin.get("/reports/purchases") { request, _ in try await purchaseReport(request, report) }
        admin.get("/reports/timeseries") { request, _ in try await timeseriesReport(request, report) }
    }

    private struct GrantBody: Decodable {
        var entitlement: String
        var expiresAt: String?
        var duration: String?
        var reason: String
        enum CodingKeys: String, CodingKey { case entitlement, expiresAt = "expires_at", duration, reason }
    }

    private func createGrant(_ caller: Caller, _ request: HTTPRequest, _ context: HTTPRequestContext, _ grants: GrantEditor) async throws -> HTTPResponse {
        let userID = try context.parameters.require("user_id", as: UserID.self).value
        let body = try request.decodeJSON(GrantBody.self)
        let entitlement = try AdminInput.text(body.entitlement, field: "entitlement", maxLength: 255)
        let reason = try AdminInput.text(body.reason, field: "reason", maxLength: 1_000, multiline: true)
        let now = Date()
        let expiresAt: Date?
        switch (body.expiresAt, body.duration) {
        case (_?, _?):
            throw ProblemError.badRequest("Give 'expires_at' or 'duration', not both (neither makes a lifetime grant).", field: "duration")
        case (let text?, nil):
            // In whole seconds, as grants start and as answers show them: what is stored is what the 201 says.
            expiresAt = GrantStore.wholeSecond(try AdminInput.instant(text, field: "expires_at"))
        case (nil, let text?):
            expiresAt = try AdminInput.duration(text, field: "duration", from: GrantStore.wholeSecond(now))
        case (nil, nil):
            expiresAt = nil
        }
        let record = try await grants.create(userID: userID, entitlement: entitlement, expiresAt: expiresAt, reason: reason,
                                             actor: caller.keyID, now: now)
        Log.info("grant_created", ["grant_id": record.grant.id, "actor": caller.keyID])
        return .json(record, status: 201)
    }

    private func revokeGrant(_ caller: Caller, _ request: HTTPRequest, _ context: HTTPRequestContext, _ grants: GrantEditor) async throws -> HTTPResponse {
        let missing = ResourceID.notFound("grant", field: "grant_id")
        let id = try ResourceID.named("grant_id", in: context.parameters, missing: missing)
        guard let record = try await grants.revoke(id: id, actor: caller.keyID, now: Date()) else { throw missing }
        Log.info("grant_revoked", ["grant_id": id.lowercasedString, "actor": caller.keyID])
        return .json(record)
    }

    private func putProduct(_ caller: Caller, _ request: HTTPRequest, _ context: HTTPRequestContext, _ editor: CatalogEditor) async throws -> HTTPResponse {
        let pathID = try context.parameters.require("product_id", as: String.self)
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
        Log.info("product_put", ["product_id": product.productID, "created": created, "actor": caller.keyID])
        return .json(product, status: created ? 201 : 200)
    }

    private func listAudit(_ request: HTTPRequest, _ audit: any AuditReading) async throws -> HTTPResponse {
        let (limit, cursor) = try AdminInput.page(request)
        let userID = try request.query["user_id"].map { try InputRules.userID($0) }
        let action = try request.query["action"].map { try AdminInput.action($0) }
        return .json(try await audit.page(AuditQuery(limit: limit, cursor: cursor, userID: userID, action: action), on: db))
    }

    private func purchaseReport(_ request: HTTPRequest, _ report: any ReportReading) async throws -> HTTPResponse {
        let window = try AdminInput.reportWindow(request, now: Date())
        let environment = try AdminInput.queryEnvironment(request)
        let csv = try AdminInput.wantsCSV(request)
        let body = try await report.purchases(from: window.from, to: window.to, environment: environment, on: db)
        guard csv else { return .json(body) }
        var response = HTTPResponse.text(body.csv, contentType: "text/csv; charset=utf-8")
        response.headers.add("Content-Disposition", "attachment; filename=\"purchases.csv\"")
        return response
    }

    private func timeseriesReport(_ request: HTTPRequest, _ report: any ReportReading) async throws -> HTTPResponse {
        let window = try AdminInput.reportWindow(request, now: Date())
        let environment = try AdminInput.queryEnvironment(request)
        let interval = try AdminInput.reportInterval(request, window: window)
        return .json(try await report.timeseries(from: window.from, to: window.to, interval: interval, environment: environment, on: db))
    }
}
