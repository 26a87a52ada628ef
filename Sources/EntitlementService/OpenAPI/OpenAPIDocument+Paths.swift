extension OpenAPIDocument {
    /// `paths`: every route of the contract with its parameters, bodies and answers.
    static let paths: String = #"""
    {
      "/healthz": {
        "get": {
          "operationId": "getHealth",
          "tags": ["service"],
          "summary": "Liveness: 200 while the process serves.",
          "security": [],
          "responses": {
            "200": {
              "description": "Serving.",
              "content": {"application/json": {"schema": {
                "allOf": [{"$ref": "#/components/schemas/Health"}],
                "properties": {"status": {"const": "ok"}}
              }}}
            }
          }
        }
      },
      "/readyz": {
        "get": {
          "operationId": "getReadiness",
          "tags": ["service"],
          "summary": "Readiness: 200 when the database answers, else 503.",
          "security": [],
          "responses": {
            "200": {
              "description": "The database answers.",
              "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Health"}}}
            },
            "503": {
              "description": "The database does not answer.",
              "content": {
                "application/json": {"schema": {"$ref": "#/components/schemas/Health"}},
                "application/problem+json": {"schema": {"$ref": "#/components/schemas/Problem"}}
              }
            }
          }
        }
      },
      "/metrics": {
        "get": {
          "operationId": "getMetrics",
          "tags": ["service"],
          "summary": "Metrics in the Prometheus text exposition format.",
          "security": [],
          "responses": {
            "200": {
              "description": "Prometheus text format (version 0.0.4).",
              "content": {"text/plain": {"schema": {"type": "string"}}}
            }
          }
        }
      },
      "/openapi.json": {
        "get": {
          "operationId": "getOpenAPIDocument",
          "tags": ["service"],
          "summary": "This document.",
          "security": [],
          "responses": {
            "200": {
              "description": "The OpenAPI 3.1 description of every route.",
              "content": {"application/json": {"schema": {"type": "object"}}}
            }
          }
        }
      },
      "/v1/receipts": {
        "post": {
          "operationId": "submitReceipt",
          "tags": ["receipts"],
          "summary": "Submit an App Store receipt for a user.",
          "description": "The receipt is stored before Apple is asked, then verified (production first; 21007 → sandbox; 21008 → production). Each App Store transaction counts once, whoever posts it and however often. With RESTORE_POLICY=transfer a purchase posted by a new user moves to that user; a transaction whose app_account_token came from POST /v1/orders belongs to that order's user.",
          "security": [{"bearer": []}],
          "parameters": [{"$ref": "#/components/parameters/WaitMs"}],
          "requestBody": {
            "required": true,
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ReceiptRequest"}}}
          },
          "responses": {
            "200": {
              "description": "Apple answered 0, or 21006 (valid, subscription expired): the user's entitlements after the receipt.",
              "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ReceiptVerified"}}}
            },
            "202": {
              "description": "Apple is slow, down or answered a retryable status: stored, retried in the background until it resolves.",
              "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ReceiptPending"}}}
            },
            "400": {"$ref": "#/components/responses/BadRequest"},
            "401": {"$ref": "#/components/responses/Unauthorized"},
            "409": {
              "description": "The purchase already belongs to another user and RESTORE_POLICY=keep: nothing moves. The problem names the conflict.",
              "content": {"application/problem+json": {"schema": {"$ref": "#/components/schemas/Problem"}}}
            },
            "413": {"$ref": "#/components/responses/PayloadTooLarge"},
            "422": {
              "description": "The receipt is rejected (Apple 21002 after retries, 21003, 21010, 21100–21199 not retryable, malformed base64, another app's bundle_id): nothing granted. `apple_status` is present where Apple answered.",
              "content": {"application/problem+json": {"schema": {"$ref": "#/components/schemas/Problem"}}}
            },
            "502": {
              "description": "Apple answered 21004 (shared secret mismatch) or 21000: the submission stays stored for retry once the configuration is fixed.",
              "content": {"application/problem+json": {"schema": {"$ref": "#/components/schemas/Problem"}}}
            },
            "503": {"$ref": "#/components/responses/Unavailable"}
          }
        }
      },
      "/v1/receipts/{verification_id}": {
        "get": {
          "operationId": "getReceiptState",
          "tags": ["receipts"],
          "summary": "The state of a submission.",
          "security": [{"bearer": []}],
          "parameters": [{"$ref": "#/components/parameters/VerificationId"}],
          "responses": {
            "200": {
              "description": "The submission: pending, verified, invalid or failed, with `apple_status` and `attempts`.",
              "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ReceiptState"}}}
            },
            "400": {"$ref": "#/components/responses/BadRequest"},
            "401": {"$ref": "#/components/responses/Unauthorized"},
            "404": {"$ref": "#/components/responses/NotFound"},
            "503": {"$ref": "#/components/responses/Unavailable"}
          }
        }
      },
      "/v1/users/{user_id}/entitlements": {
        "get": {
          "operationId": "getEntitlements",
          "tags": ["users"],
          "summary": "What this user owns now (or at `at`).",
          "security": [{"bearer": []}],
          "parameters": [
            {"$ref": "#/components/parameters/UserId"},
            {"$ref": "#/components/parameters/At"}
          ],
          "responses": {
            "200": {
              "description": "Entitlements by name, active and inactive, and consumable balances.",
              "content": {"application/json": {"schema": {"$ref": "#/components/schemas/EntitlementsResponse"}}}
            },
            "400": {"$ref": "#/components/responses/BadRequest"},
            "401": {"$ref": "#/components/responses/Unauthorized"},
            "503": {"$ref": "#/components/responses/Unavailable"}
          }
        }
      },
      "/v1/users/{user_id}/transactions": {
        "get": {
          "operationId": "getTransactions",
          "tags": ["users"],
          "summary": "The user's App Store transactions, newest first.",
          "security": [{"bearer": []}],
          "parameters": [{"$ref": "#/components/parameters/UserId"}],
          "responses": {
            "200": {
              "description": "The transactions.",
              "content": {"application/json": {"schema": {"$ref": "#/components/schemas/TransactionList"}}}
            },
            "400": {"$ref": "#/components/responses/BadRequest"},
            "401": {"$ref": "#/components/responses/Unauthorized"},
            "503": {"$ref": "#/components/responses/Unavailable"}
          }
        }
      },
      "/v1/users/{user_id}/consumables/{currency}/consume": {
        "post": {
          "operationId": "consume",
          "tags": ["users"],
          "summary": "Spend from a consumable balance.",
          "description": "The same `idempotency_key` twice spends once and answers the same balance.",
          "security": [{"bearer": []}],
          "parameters": [
            {"$ref": "#/components/parameters/UserId"},
            {"$ref": "#/components/parameters/Currency"}
          ],
          "requestBody": {
            "required": true,
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ConsumeRequest"}}}
          },
          "responses": {
            "200": {
              "description": "Spent: the new balance.",
              "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ConsumeResponse"}}}
            },
            "400": {"$ref": "#/components/responses/BadRequest"},
            "401": {"$ref": "#/components/responses/Unauthorized"},
            "409": {
              "description": "The balance is short of `amount`: nothing spent.",
              "content": {"application/problem+json": {"schema": {"$ref": "#/components/schemas/Problem"}}}
            },
            "413": {"$ref": "#/components/responses/PayloadTooLarge"},
            "503": {"$ref": "#/components/responses/Unavailable"}
          }
        }
      },
      "/v1/orders": {
        "post": {
          "operationId": "createOrder",
          "tags": ["orders"],
          "summary": "Create a server order to carry through a purchase.",
          "security": [{"bearer": []}],
          "requestBody": {
            "required": true,
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/OrderRequest"}}}
          },
          "responses": {
            "201": {
              "description": "The order, with the app_account_token to pass to StoreKit.",
              "content": {"application/json": {"schema": {
                "allOf": [{"$ref": "#/components/schemas/Order"}],
                "required": ["order_id", "app_account_token"]
              }}}
            },
            "400": {"$ref": "#/components/responses/BadRequest"},
            "401": {"$ref": "#/components/responses/Unauthorized"},
            "413": {"$ref": "#/components/responses/PayloadTooLarge"},
            "422": {
              "description": "The catalog has no product with this `product_id`.",
              "content": {"application/problem+json": {"schema": {"$ref": "#/components/schemas/Problem"}}}
            },
            "503": {"$ref": "#/components/responses/Unavailable"}
          }
        }
      },
      "/v1/orders/{order_id}": {
        "get": {
          "operationId": "getOrder",
          "tags": ["orders"],
          "summary": "An order and whether a purchase fulfilled it.",
          "security": [{"bearer": []}],
          "parameters": [{"$ref": "#/components/parameters/OrderId"}],
          "responses": {
            "200": {
              "description": "The order.",
              "content": {"application/json": {"schema": {
                "allOf": [{"$ref": "#/components/schemas/Order"}],
                "required": ["order_id", "user_id", "product_id", "status"]
              }}}
            },
            "400": {"$ref": "#/components/responses/BadRequest"},
            "401": {"$ref": "#/components/responses/Unauthorized"},
            "404": {"$ref": "#/components/responses/NotFound"},
            "503": {"$ref": "#/components/responses/Unavailable"}
          }
        }
      },
      "/v1/admin/users/{user_id}/grants": {
        "post": {
          "operationId": "createGrant",
          "tags": ["admin"],
          "summary": "Grant an entitlement by hand.",
          "description": "`expires_at` (RFC 3339) or `duration` (ISO 8601, counted from now) sets the end; neither means a lifetime grant, both is a 400. A grant stands beside the user's App Store purchases: where both give an entitlement, GET /v1/users/{user_id}/entitlements shows the one that lasts longer, so a grant never shortens a purchase. Audited as `grant.create`.",
          "security": [{"bearer": []}],
          "parameters": [{"$ref": "#/components/parameters/UserId"}],
          "requestBody": {
            "required": true,
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/GrantRequest"}}}
          },
          "responses": {
            "201": {
              "description": "The grant.",
              "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Grant"}}}
            },
            "400": {"$ref": "#/components/responses/BadRequest"},
            "401": {"$ref": "#/components/responses/Unauthorized"},
            "403": {"$ref": "#/components/responses/Forbidden"},
            "413": {"$ref": "#/components/responses/PayloadTooLarge"},
            "503": {"$ref": "#/components/responses/Unavailable"}
          }
        }
      },
      "/v1/admin/grants/{grant_id}": {
        "delete": {
          "operationId": "revokeGrant",
          "tags": ["admin"],
          "summary": "Revoke a grant.",
          "description": "Sets `revoked_at` and `revoked_by`; audited as `grant.revoke`. Idempotent: revoking a grant that is already revoked answers 200 with the grant as it stands (the first revocation's `revoked_at` and `revoked_by`) and records nothing again.",
          "security": [{"bearer": []}],
          "parameters": [{"$ref": "#/components/parameters/GrantId"}],
          "responses": {
            "200": {
              "description": "The grant, revoked (now or by an earlier call).",
              "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Grant"}}}
            },
            "400": {"$ref": "#/components/responses/BadRequest"},
            "401": {"$ref": "#/components/responses/Unauthorized"},
            "403": {"$ref": "#/components/responses/Forbidden"},
            "404": {"$ref": "#/components/responses/NotFound"},
            "503": {"$ref": "#/components/responses/Unavailable"}
          }
        }
      },
      "/v1/admin/products/{product_id}": {
        "put": {
          "operationId": "putProduct",
          "tags": ["admin"],
          "summary": "Create or replace one catalog entry.",
          "description": "The body is the product, with or without `product_id` (when present it must equal the path's). Validated like the catalog file: a 400 names the field at fault. Takes effect at once on this instance and within a second on the others; audited as `product.put` with the entry before and after.",
          "security": [{"bearer": []}],
          "parameters": [{"$ref": "#/components/parameters/ProductId"}],
          "requestBody": {
            "required": true,
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ProductInput"}}}
          },
          "responses": {
            "200": {
              "description": "Replaced: the entry as stored.",
              "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Product"}}}
            },
            "201": {
              "description": "Created: the entry as stored.",
              "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Product"}}}
            },
            "400": {"$ref": "#/components/responses/BadRequest"},
            "401": {"$ref": "#/components/responses/Unauthorized"},
            "403": {"$ref": "#/components/responses/Forbidden"},
            "413": {"$ref": "#/components/responses/PayloadTooLarge"},
            "503": {"$ref": "#/components/responses/Unavailable"}
          }
        }
      },
      "/v1/admin/products": {
        "get": {
          "operationId": "listProducts",
          "tags": ["admin"],
          "summary": "The catalog.",
          "security": [{"bearer": []}],
          "responses": {
            "200": {
              "description": "Every catalog entry.",
              "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ProductList"}}}
            },
            "400": {"$ref": "#/components/responses/BadRequest"},
            "401": {"$ref": "#/components/responses/Unauthorized"},
            "403": {"$ref": "#/components/responses/Forbidden"},
            "503": {"$ref": "#/components/responses/Unavailable"}
          }
        }
      },
      "/v1/admin/audit": {
        "get": {
          "operationId": "listAuditEvents",
          "tags": ["admin"],
          "summary": "Admin actions and ownership transfers, newest first.",
          "security": [{"bearer": []}],
          "parameters": [
            {"$ref": "#/components/parameters/Limit"},
            {"$ref": "#/components/parameters/Cursor"},
            {"$ref": "#/components/parameters/AuditUserId"},
            {"$ref": "#/components/parameters/AuditAction"}
          ],
          "responses": {
            "200": {
              "description": "One page of events.",
              "content": {"application/json": {"schema": {"$ref": "#/components/schemas/AuditPage"}}}
            },
            "400": {"$ref": "#/components/responses/BadRequest"},
            "401": {"$ref": "#/components/responses/Unauthorized"},
            "403": {"$ref": "#/components/responses/Forbidden"},
            "503": {"$ref": "#/components/responses/Unavailable"}
          }
        }
      },
      "/v1/admin/reports/purchases": {
        "get": {
          "operationId": "reportPurchases",
          "tags": ["admin"],
          "summary": "Verified purchases by product and environment: counts and catalog prices.",
          "description": "Every verified App Store transaction (renewals included, each once) purchased in [`from`, `to`), grouped by product and environment: Sandbox purchases are never counted with Production ones. `from` and `to` are required; `to` must be later than `from`.",
          "security": [{"bearer": []}],
          "parameters": [
            {"$ref": "#/components/parameters/From"},
            {"$ref": "#/components/parameters/To"},
            {"$ref": "#/components/parameters/ReportEnvironment"}
          ],
          "responses": {
            "200": {
              "description": "The report.",
              "content": {"application/json": {"schema": {"$ref": "#/components/schemas/PurchaseReport"}}}
            },
            "400": {"$ref": "#/components/responses/BadRequest"},
            "401": {"$ref": "#/components/responses/Unauthorized"},
            "403": {"$ref": "#/components/responses/Forbidden"},
            "503": {"$ref": "#/components/responses/Unavailable"}
          }
        }
      },
      "/v1/notifications/app-store": {
        "post": {
          "operationId": "receiveAppStoreNotification",
          "tags": ["notifications"],
          "summary": "App Store Server Notifications, posted by Apple.",
          "description": "Apple sends no bearer key: a version 1 notification is checked by its `password` (the shared secret) and its `unified_receipt` is recorded for purchases that have an owner. A version 2 notification (`signedPayload`) must be an ES256 JWS whose `x5c` chain leads to a trusted root (Apple Root CA - G3, or those of `APPLE_ROOT_CERTIFICATES`), checked at its `signedDate`; its signed transaction and renewal info are verified the same way and recorded for purchases that have an owner, and its `bundleId` must be `APPLE_BUNDLE_ID` when that is configured. Notifications without a transaction (`TEST`, summaries) are acknowledged. Any answer but 200 makes Apple retry later.",
          "security": [],
          "requestBody": {
            "required": true,
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/AppStoreNotification"}}}
          },
          "responses": {
            "200": {"description": "Processed (or acknowledged and ignored)."},
            "400": {"$ref": "#/components/responses/BadRequest"},
            "401": {
              "description": "The `password` is not the shared secret, or the signed payload (or its signed transaction or renewal info) does not verify against a trusted root (`field`: `signedPayload`).",
              "content": {"application/problem+json": {"schema": {"$ref": "#/components/schemas/Problem"}}}
            },
            "413": {"$ref": "#/components/responses/PayloadTooLarge"},
            "422": {
              "description": "A version 2 notification whose signed payload verifies but does not decode, or is for another app's bundle id (`field`: `signedPayload`).",
              "content": {"application/problem+json": {"schema": {"$ref": "#/components/schemas/Problem"}}}
            },
            "503": {"$ref": "#/components/responses/Unavailable"}
          }
        }
      }
    }
    """#
}
