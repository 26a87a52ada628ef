extension OpenAPIDocument {
    /// `components.parameters`: the path and query parameters the routes share.
    static let parameters: String = #"""
    {
      "UserId": {
        "name": "user_id",
        "in": "path",
        "required": true,
        "description": "The app's id for the user: 1–128 printable characters.",
        "schema": {"$ref": "#/components/schemas/UserIdentifier"}
      },
      "VerificationId": {
        "name": "verification_id",
        "in": "path",
        "required": true,
        "description": "The id POST /v1/receipts answered with.",
        "schema": {"type": "string", "format": "uuid"}
      },
      "OrderId": {
        "name": "order_id",
        "in": "path",
        "required": true,
        "description": "The id POST /v1/orders answered with.",
        "schema": {"type": "string", "format": "uuid"}
      },
      "GrantId": {
        "name": "grant_id",
        "in": "path",
        "required": true,
        "description": "The id of a grant, as POST /v1/admin/users/{user_id}/grants answered.",
        "schema": {"type": "string", "format": "uuid"}
      },
      "ProductId": {
        "name": "product_id",
        "in": "path",
        "required": true,
        "description": "The App Store product id: 1–255 letters, digits, `.`, `_` or `-`.",
        "schema": {"$ref": "#/components/schemas/ProductIdentifier"}
      },
      "Currency": {
        "name": "currency",
        "in": "path",
        "required": true,
        "description": "The consumable currency named by the catalog (a product's `currency`).",
        "schema": {"type": "string", "minLength": 1, "maxLength": 255, "pattern": "^[A-Za-z0-9._-]+$"}
      },
      "WaitMs": {
        "name": "wait_ms",
        "in": "query",
        "required": false,
        "description": "How long to wait for Apple, in milliseconds, before answering 202 with the submission pending.",
        "schema": {"type": "integer", "minimum": 0, "maximum": 30000, "default": 10000}
      },
      "At": {
        "name": "at",
        "in": "query",
        "required": false,
        "description": "Evaluate at this instant (RFC 3339) instead of now.",
        "schema": {"type": "string", "format": "date-time"}
      },
      "Limit": {
        "name": "limit",
        "in": "query",
        "required": false,
        "description": "Most events on one page.",
        "schema": {"type": "integer", "minimum": 1, "maximum": 500, "default": 50}
      },
      "Cursor": {
        "name": "cursor",
        "in": "query",
        "required": false,
        "description": "The `next_cursor` of the previous page, as it was answered (opaque); absent for the newest page.",
        "schema": {"type": "string", "minLength": 1, "maxLength": 64, "pattern": "^[A-Za-z0-9_-]+$"}
      },
      "AuditUserId": {
        "name": "user_id",
        "in": "query",
        "required": false,
        "description": "Only events about this user (grants to them, purchases moved to them).",
        "schema": {"$ref": "#/components/schemas/UserIdentifier"}
      },
      "AuditAction": {
        "name": "action",
        "in": "query",
        "required": false,
        "description": "Only events of this action: `grant.create`, `grant.revoke`, `product.put` or `ownership.transfer`.",
        "schema": {"type": "string", "minLength": 1, "maxLength": 100, "pattern": "^[!-~]+$", "examples": ["grant.create"]}
      },
      "From": {
        "name": "from",
        "in": "query",
        "required": true,
        "description": "Start of the reporting window (RFC 3339, inclusive), compared with the purchase date.",
        "schema": {"type": "string", "format": "date-time"}
      },
      "To": {
        "name": "to",
        "in": "query",
        "required": true,
        "description": "End of the reporting window (RFC 3339, exclusive), compared with the purchase date.",
        "schema": {"type": "string", "format": "date-time"}
      },
      "ReportEnvironment": {
        "name": "environment",
        "in": "query",
        "required": false,
        "description": "Only purchases from this App Store environment; both when absent.",
        "schema": {"$ref": "#/components/schemas/StoreEnvironment"}
      }
    }
    """#

    /// `components.responses`: the error answers, each an application/problem+json ``Problem``.
    static let responses: String = #"""
    {
      "BadRequest": {
        "description": "Malformed JSON, or a missing or invalid field, parameter or query value; the problem names it.",
        "content": {"application/problem+json": {"schema": {"$ref": "#/components/schemas/Problem"}}}
      },
      "Unauthorized": {
        "description": "No `Authorization: Bearer` key, or a key the service does not know.",
        "headers": {"WWW-Authenticate": {"description": "The scheme to authenticate with.", "schema": {"type": "string", "const": "Bearer"}}},
        "content": {"application/problem+json": {"schema": {"$ref": "#/components/schemas/Problem"}}}
      },
      "Forbidden": {
        "description": "An app key on an admin route.",
        "content": {"application/problem+json": {"schema": {"$ref": "#/components/schemas/Problem"}}}
      },
      "NotFound": {
        "description": "Nothing with that id.",
        "content": {"application/problem+json": {"schema": {"$ref": "#/components/schemas/Problem"}}}
      },
      "PayloadTooLarge": {
        "description": "The request body is over 1 MiB.",
        "content": {"application/problem+json": {"schema": {"$ref": "#/components/schemas/Problem"}}}
      },
      "Unavailable": {
        "description": "The database does not answer; try again later.",
        "headers": {"Retry-After": {"description": "Seconds to wait before trying again.", "schema": {"type": "string", "pattern": "^[0-9]+$"}}},
        "content": {"application/problem+json": {"schema": {"$ref": "#/components/schemas/Problem"}}}
      }
    }
    """#
}
