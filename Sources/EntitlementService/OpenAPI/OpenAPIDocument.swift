/// The OpenAPI 3.1 description of every route of the contract, served as `GET /openapi.json`.
///
/// The document is JSON text written out by hand in four parts, each a complete JSON object: ``paths``,
/// ``parameters``, ``responses`` and ``schemas``. ``json`` joins them into the served document; the tests
/// check that it parses, names every route of the contract and that every `$ref` resolves.
enum OpenAPIDocument {
    /// The served document: UTF-8 JSON, `openapi` 3.1.0.
    static let json: String = #"""
    {
      "openapi": "3.1.0",
      "info": {
        "title": "Entitlement service",
        "version": "1.0.0",
        "summary": "What does this user own? App Store receipts, admin grants and consumable balances.",
        "description": "App backends ask what a user owns; clients post App Store receipts (verifyReceipt); admins grant entitlements by hand. JSON in and out, UTF-8; times are RFC 3339 UTC strings. Every route under /v1 except the App Store notification route needs `Authorization: Bearer <key>`: a missing or unknown key is answered 401, an app key on an admin route 403. Errors are application/problem+json. A request body over 1 MiB is answered 413; malformed JSON or a missing or invalid field 400 naming the field."
      },
      "servers": [{"url": "/"}],
      "tags": [
        {"name": "service", "description": "Liveness, readiness, metrics and this document; no key needed."},
        {"name": "receipts", "description": "App Store receipt submissions (app key)."},
        {"name": "users", "description": "Entitlements, transactions and consumable balances of one user (app key)."},
        {"name": "orders", "description": "Server orders carried through a purchase as its app_account_token (app key)."},
        {"name": "admin", "description": "Grants, catalog, audit log and reports (admin key)."},
        {"name": "notifications", "description": "App Store Server Notifications, posted by Apple."}
      ],
      "paths": \#(paths),
      "components": {
        "securitySchemes": {
          "bearer": {
            "type": "http",
            "scheme": "bearer",
            "description": "An app-backend key from API_KEYS or an admin key from ADMIN_API_KEYS. Admin keys may call every app route; app keys get 403 on /v1/admin routes."
          }
        },
        "parameters": \#(parameters),
        "responses": \#(responses),
        "schemas": \#(schemas)
      }
    }
    """#
}
