extension OpenAPIDocument {
    /// `components.schemas`: every request and response body. Responses allow properties beyond the ones
    /// listed, and only fields the service always writes are `required`.
    static let schemas: String = #"""
    {
      "Problem": {
        "type": "object",
        "description": "An error (RFC 9457 problem details). Never a stack trace, never a secret.",
        "required": ["title", "status"],
        "properties": {
          "type": {"type": "string", "description": "A URI reference naming the kind of problem; `about:blank` when only the status says it."},
          "title": {"type": "string", "description": "A short summary of the kind of problem."},
          "status": {"type": "integer", "minimum": 400, "maximum": 599, "description": "The HTTP status."},
          "detail": {"type": "string", "description": "What went wrong with this request."},
          "apple_status": {"type": "integer", "description": "The `status` Apple's verifyReceipt answered, where Apple answered."},
          "field": {"type": "string", "description": "The request field, parameter or query value at fault (400)."},
          "errors": {
            "type": "array",
            "description": "Every field at fault, where there are several.",
            "items": {
              "type": "object",
              "properties": {
                "field": {"type": "string"},
                "detail": {"type": "string"}
              }
            }
          }
        }
      },
      "Health": {
        "type": "object",
        "required": ["status"],
        "properties": {
          "status": {"type": "string", "description": "`ok` from /healthz, `ready` from /readyz."}
        }
      },
      "StoreEnvironment": {
        "type": "string",
        "enum": ["Production", "Sandbox"],
        "description": "The App Store environment a receipt or transaction comes from."
      },
      "ProductType": {
        "type": "string",
        "enum": ["consumable", "non_consumable", "auto_renewable", "non_renewing"]
      },
      "Ownership": {
        "type": "string",
        "enum": ["purchased", "family_shared"],
        "description": "Whether the user bought the product or has it through Family Sharing."
      },
      "ProductIdentifier": {
        "type": "string",
        "minLength": 1,
        "maxLength": 255,
        "pattern": "^[A-Za-z0-9._-]+$",
        "description": "An App Store product id: letters, digits, `.`, `_` or `-`."
      },
      "UserIdentifier": {
        "type": "string",
        "minLength": 1,
        "maxLength": 128,
        "pattern": "^[^\\u0000-\\u001F\\u007F-\\u009F]*[^\\s\\u0000-\\u001F\\u007F-\\u009F][^\\u0000-\\u001F\\u007F-\\u009F]*$",
        "description": "The app's id for a user: 1–128 printable characters (no control characters, not only spaces)."
      },
      "ISODuration": {
        "type": "string",
        "pattern": "^P([0-9]+Y)?([0-9]+M)?([0-9]+W)?([0-9]+D)?(T([0-9]+H)?([0-9]+M)?([0-9]+S)?)?$",
        "description": "An ISO 8601 duration longer than zero, such as `P1M`, `P7D`, `P1Y` or `P2W`.",
        "examples": ["P1M"]
      },
      "Entitlement": {
        "type": "object",
        "description": "What the user holds for one entitlement name. An App Store source carries the App Store fields; a grant carries `grant_id` and `reason` instead. Inactive entitlements the user had stay listed with `active: false` and `inactive_reason`.",
        "required": ["active", "source"],
        "properties": {
          "active": {"type": "boolean"},
          "source": {"type": "string", "enum": ["app_store", "grant"]},
          "product_id": {"type": "string", "description": "App Store source: the product that gives it."},
          "product_type": {"$ref": "#/components/schemas/ProductType"},
          "expires_at": {"type": ["string", "null"], "format": "date-time", "description": "When access ends (or ended); `null` for lifetime access. In a grace period, the end of the grace period."},
          "environment": {"$ref": "#/components/schemas/StoreEnvironment"},
          "will_renew": {"type": "boolean"},
          "in_grace_period": {"type": "boolean", "description": "Active past the expiry through the billing grace period."},
          "in_billing_retry": {"type": "boolean", "description": "Apple is retrying a failed renewal payment."},
          "ownership": {"$ref": "#/components/schemas/Ownership"},
          "original_transaction_id": {"type": "string"},
          "grant_id": {"type": "string", "description": "Grant source: the grant that gives it."},
          "reason": {"type": "string", "description": "Grant source: why the admin gave it."},
          "inactive_reason": {"type": "string", "enum": ["expired", "refunded", "revoked", "billing_retry_ended"], "description": "Present only when `active` is false."}
        }
      },
      "EntitlementsResponse": {
        "type": "object",
        "description": "What the user owns at `as_of`: entitlements by name (where several sources give one, the one that lasts longest) and consumable balances by currency.",
        "required": ["user_id", "as_of", "entitlements", "consumables"],
        "properties": {
          "user_id": {"type": "string"},
          "as_of": {"type": "string", "format": "date-time"},
          "entitlements": {
            "type": "object",
            "additionalProperties": {"$ref": "#/components/schemas/Entitlement"}
          },
          "consumables": {
            "type": "object",
            "description": "Balance by consumable currency; a balance may be negative after a refund.",
            "additionalProperties": {"type": "integer"}
          },
          "unknown_products": {
            "type": "array",
            "description": "Present when the user bought products the catalog does not know: stored, never granted.",
            "items": {"type": "string"}
          }
        },
        "examples": [{
          "user_id": "u1",
          "as_of": "2026-11-22T01:20:00Z",
          "entitlements": {
            "premium": {
              "active": true,
              "source": "app_store",
              "product_id": "com.example.premium.monthly",
              "product_type": "auto_renewable",
              "expires_at": "2026-12-22T01:20:00Z",
              "environment": "Production",
              "will_renew": true,
              "in_grace_period": false,
              "in_billing_retry": false,
              "ownership": "purchased",
              "original_transaction_id": "1000000123"
            }
          },
          "consumables": {"coins": 100}
        }]
      },
      "ReceiptRequest": {
        "type": "object",
        "required": ["user_id", "receipt_data"],
        "properties": {
          "user_id": {"$ref": "#/components/schemas/UserIdentifier"},
          "receipt_data": {"type": "string", "minLength": 1, "contentEncoding": "base64", "description": "Base64 of the App Store receipt."},
          "order_id": {"type": "string", "format": "uuid", "description": "A server order from POST /v1/orders that this purchase carries."}
        },
        "examples": [{"user_id": "u1", "receipt_data": "MIIT0QYJKoZIhvcNAQcCoIITwjCCE74CAQExCzAJBgUrDgMCGgUA"}]
      },
      "ReceiptVerified": {
        "description": "Apple verified the receipt: the user's entitlements after it, and which submission and environment.",
        "allOf": [
          {"$ref": "#/components/schemas/EntitlementsResponse"},
          {
            "type": "object",
            "required": ["verification_id", "status", "environment"],
            "properties": {
              "verification_id": {"type": "string", "format": "uuid"},
              "status": {"type": "string", "const": "verified"},
              "environment": {"$ref": "#/components/schemas/StoreEnvironment"},
              "transferred_from": {"type": ["string", "null"], "description": "The previous owner, when a purchase moved to this user (RESTORE_POLICY=transfer)."}
            }
          }
        ]
      },
      "ReceiptPending": {
        "type": "object",
        "description": "The receipt is stored; Apple has not answered yet and the service keeps retrying in the background.",
        "required": ["verification_id", "status"],
        "properties": {
          "verification_id": {"type": "string", "format": "uuid"},
          "status": {"type": "string", "const": "pending"}
        }
      },
      "ReceiptState": {
        "type": "object",
        "description": "The state of one submission.",
        "required": ["verification_id", "status"],
        "properties": {
          "verification_id": {"type": "string", "format": "uuid"},
          "status": {"type": "string", "enum": ["pending", "verified", "invalid", "failed"]},
          "apple_status": {"type": ["integer", "null"], "description": "The last status Apple answered; `null` before any answer."},
          "attempts": {"type": "integer", "minimum": 0, "description": "How many times Apple has been asked."},
          "environment": {"type": ["string", "null"], "enum": ["Production", "Sandbox", null]},
          "user_id": {"type": "string"},
          "order_id": {"type": ["string", "null"], "format": "uuid"},
          "created_at": {"type": "string", "format": "date-time"},
          "updated_at": {"type": "string", "format": "date-time"}
        }
      },
      "Transaction": {
        "type": "object",
        "description": "One App Store transaction the user owns.",
        "required": ["transaction_id", "product_id"],
        "properties": {
          "transaction_id": {"type": "string"},
          "original_transaction_id": {"type": "string"},
          "product_id": {"type": "string"},
          "purchase_date": {"type": "string", "format": "date-time"},
          "original_purchase_date": {"type": ["string", "null"], "format": "date-time"},
          "expires_date": {"type": ["string", "null"], "format": "date-time"},
          "cancellation_date": {"type": ["string", "null"], "format": "date-time", "description": "When Apple refunded or revoked it."},
          "cancellation_reason": {"type": ["string", "null"]},
          "environment": {"$ref": "#/components/schemas/StoreEnvironment"},
          "ownership": {"$ref": "#/components/schemas/Ownership"},
          "is_upgraded": {"type": "boolean"},
          "is_trial_period": {"type": "boolean"},
          "is_in_intro_offer_period": {"type": "boolean"},
          "quantity": {"type": "integer", "minimum": 0},
          "web_order_line_item_id": {"type": ["string", "null"]},
          "subscription_group_identifier": {"type": ["string", "null"]},
          "app_account_token": {"type": ["string", "null"]}
        }
      },
      "TransactionList": {
        "type": "object",
        "required": ["transactions"],
        "properties": {
          "user_id": {"type": "string"},
          "transactions": {
            "type": "array",
            "description": "Newest first.",
            "items": {"$ref": "#/components/schemas/Transaction"}
          }
        }
      },
      "ConsumeRequest": {
        "type": "object",
        "required": ["amount", "idempotency_key"],
        "properties": {
          "amount": {"type": "integer", "format": "int64", "minimum": 1, "description": "How much to spend."},
          "idempotency_key": {"type": "string", "minLength": 1, "maxLength": 200, "description": "The same key twice spends once."}
        },
        "examples": [{"amount": 1, "idempotency_key": "spend-7f3a"}]
      },
      "ConsumeResponse": {
        "type": "object",
        "required": ["balance"],
        "properties": {
          "user_id": {"type": "string"},
          "currency": {"type": "string"},
          "balance": {"type": "integer", "format": "int64", "description": "The balance after the spend."}
        }
      },
      "OrderRequest": {
        "type": "object",
        "required": ["user_id", "product_id"],
        "properties": {
          "user_id": {"$ref": "#/components/schemas/UserIdentifier"},
          "product_id": {"$ref": "#/components/schemas/ProductIdentifier"}
        },
        "examples": [{"user_id": "u1", "product_id": "com.example.premium.monthly"}]
      },
      "Order": {
        "type": "object",
        "description": "A server order: a purchase carrying `app_account_token` belongs to `user_id`, whoever posts it.",
        "required": ["order_id"],
        "properties": {
          "order_id": {"type": "string", "format": "uuid"},
          "user_id": {"type": "string"},
          "product_id": {"type": "string"},
          "app_account_token": {"type": "string", "format": "uuid", "description": "Pass to StoreKit as the purchase's appAccountToken."},
          "status": {"type": "string", "enum": ["created", "fulfilled"]},
          "transaction_id": {"type": ["string", "null"], "description": "The App Store transaction that fulfilled the order."},
          "created_at": {"type": "string", "format": "date-time"},
          "fulfilled_at": {"type": ["string", "null"], "format": "date-time"}
        }
      },
      "GrantRequest": {
        "type": "object",
        "description": "At most one of `expires_at` and `duration` (both is a 400); neither means a lifetime grant. Unknown fields are ignored.",
        "required": ["entitlement", "reason"],
        "properties": {
          "entitlement": {"type": "string", "minLength": 1, "maxLength": 255, "pattern": "^[^\\u0000-\\u001F\\u007F-\\u009F]*[^\\s\\u0000-\\u001F\\u007F-\\u009F][^\\u0000-\\u001F\\u007F-\\u009F]*$", "description": "The entitlement name (no control characters, not only spaces); it need not be in the catalog."},
          "expires_at": {"type": ["string", "null"], "format": "date-time", "description": "When the grant ends (RFC 3339, at most 9999-12-31T23:59:59Z)."},
          "duration": {"anyOf": [{"$ref": "#/components/schemas/ISODuration"}, {"type": "null"}], "description": "How long the grant lasts from now (ISO 8601, such as P1M)."},
          "reason": {"type": "string", "minLength": 1, "maxLength": 1000, "pattern": "^[^\\u0000-\\u0008\\u000B\\u000C\\u000E-\\u001F\\u007F-\\u009F]*[^\\s\\u0000-\\u001F\\u007F-\\u009F][^\\u0000-\\u0008\\u000B\\u000C\\u000E-\\u001F\\u007F-\\u009F]*$", "description": "Why: free text, not blank; no control characters but line breaks and tabs."}
        },
        "not": {"required": ["expires_at", "duration"]},
        "examples": [{"entitlement": "premium", "duration": "P1M", "reason": "support ticket 4711"}]
      },
      "Grant": {
        "type": "object",
        "required": ["grant_id", "user_id", "entitlement", "reason", "created_at", "expires_at", "revoked_at", "created_by"],
        "properties": {
          "grant_id": {"type": "string", "format": "uuid"},
          "user_id": {"type": "string"},
          "entitlement": {"type": "string"},
          "expires_at": {"type": ["string", "null"], "format": "date-time", "description": "`null` for a lifetime grant."},
          "reason": {"type": "string"},
          "created_at": {"type": "string", "format": "date-time"},
          "created_by": {"type": "string", "description": "The key id of the admin who granted it (`admin#1`), never a key."},
          "revoked_at": {"type": ["string", "null"], "format": "date-time", "description": "`null` while the grant stands."},
          "revoked_by": {"type": ["string", "null"], "description": "The key id of the admin who revoked it."}
        }
      },
      "ProductInput": {
        "type": "object",
        "description": "One catalog entry. `duration` is required for `non_renewing`; `currency` and `amount` for `consumable`; every type but `consumable` unlocks at least one entitlement. `product_id`, when given, must equal the path's.",
        "required": ["type"],
        "properties": {
          "product_id": {"$ref": "#/components/schemas/ProductIdentifier"},
          "type": {"$ref": "#/components/schemas/ProductType"},
          "entitlements": {
            "type": "array",
            "uniqueItems": true,
            "items": {"type": "string", "minLength": 1, "maxLength": 255, "pattern": "^[^\\u0000-\\u001F\\u007F-\\u009F]+$"}
          },
          "duration": {"anyOf": [{"$ref": "#/components/schemas/ISODuration"}, {"type": "null"}]},
          "currency": {"type": ["string", "null"], "minLength": 1, "maxLength": 255, "pattern": "^[A-Za-z0-9._-]+$", "description": "The ledger currency a consumable credits."},
          "amount": {"type": ["integer", "null"], "minimum": 1, "description": "How much of `currency` one consumable purchase credits."},
          "price": {"type": ["string", "null"], "pattern": "^[0-9]+(\\.[0-9]+)?$", "description": "List price as a decimal string, for reports."},
          "price_currency": {"type": ["string", "null"], "pattern": "^[A-Z]{3}$", "description": "ISO 4217 currency of `price`."},
          "subscription_group": {"type": ["string", "null"], "minLength": 1, "maxLength": 255, "pattern": "^[^\\u0000-\\u001F\\u007F-\\u009F]+$"}
        },
        "allOf": [
          {
            "if": {"required": ["type"], "properties": {"type": {"const": "non_renewing"}}},
            "then": {"required": ["duration"], "properties": {"duration": {"$ref": "#/components/schemas/ISODuration"}}}
          },
          {
            "if": {"required": ["type"], "properties": {"type": {"const": "consumable"}}},
            "then": {"required": ["currency", "amount"], "properties": {"currency": {"type": "string"}, "amount": {"type": "integer"}}},
            "else": {"required": ["entitlements"], "properties": {"entitlements": {"minItems": 1}}}
          }
        ],
        "examples": [{"type": "auto_renewable", "entitlements": ["premium"], "price": "4.99", "price_currency": "USD", "subscription_group": "premium"}]
      },
      "Product": {
        "allOf": [
          {"$ref": "#/components/schemas/ProductInput"},
          {"type": "object", "required": ["product_id", "type"]}
        ]
      },
      "ProductList": {
        "type": "object",
        "required": ["products"],
        "properties": {
          "products": {"type": "array", "items": {"$ref": "#/components/schemas/Product"}}
        }
      },
      "AuditEvent": {
        "type": "object",
        "description": "One admin action or ownership transfer: who (a key id, never a key), what, when, before and after.",
        "required": ["event_id", "occurred_at", "actor", "action", "subject", "user_id", "before", "after"],
        "properties": {
          "event_id": {"type": "integer", "minimum": 1},
          "occurred_at": {"type": "string", "format": "date-time"},
          "actor": {"type": "string", "description": "The key id of the admin (`admin#1`), or of the key that posted the receipt for an ownership transfer."},
          "action": {"type": "string", "description": "`grant.create`, `grant.revoke`, `product.put` or `ownership.transfer`.", "examples": ["grant.create"]},
          "subject": {"type": "string", "description": "What was acted on: a grant id, a product id or an original transaction id."},
          "user_id": {"type": ["string", "null"], "description": "The user concerned; `null` for catalog changes."},
          "before": {"description": "The state before the action (`null` when there was none)."},
          "after": {"description": "The state after the action."}
        }
      },
      "AuditPage": {
        "type": "object",
        "required": ["events", "next_cursor"],
        "properties": {
          "events": {"type": "array", "description": "Newest first.", "items": {"$ref": "#/components/schemas/AuditEvent"}},
          "next_cursor": {"type": ["string", "null"], "description": "Pass as `cursor` (with the same filters) for the next older page; `null` on the last page."}
        }
      },
      "PurchaseReportRow": {
        "type": "object",
        "required": ["product_id", "environment", "count", "refunded", "units", "product_type", "price", "price_currency", "revenue"],
        "properties": {
          "product_id": {"type": "string"},
          "environment": {"$ref": "#/components/schemas/StoreEnvironment"},
          "product_type": {"type": ["string", "null"], "enum": ["consumable", "non_consumable", "auto_renewable", "non_renewing", null], "description": "From the catalog; `null` for a product it does not know."},
          "count": {"type": "integer", "minimum": 1, "description": "Verified purchases (App Store transactions, each once, renewals included)."},
          "refunded": {"type": "integer", "minimum": 0, "description": "Of `count`, the ones Apple has refunded or revoked since."},
          "units": {"type": "integer", "minimum": 0, "description": "Items bought: the sum of the transactions' `quantity`."},
          "price": {"type": ["string", "null"], "description": "The catalog price, where the catalog has one."},
          "price_currency": {"type": ["string", "null"], "description": "The ISO 4217 currency of `price`."},
          "revenue": {"type": ["string", "null"], "description": "`price` × the units not refunded, as a decimal string, where the catalog has a price."}
        }
      },
      "PurchaseReport": {
        "type": "object",
        "required": ["from", "to", "environment", "rows"],
        "properties": {
          "from": {"type": "string", "format": "date-time"},
          "to": {"type": "string", "format": "date-time"},
          "environment": {"type": ["string", "null"], "enum": ["Production", "Sandbox", null], "description": "The filter asked for; `null` for both."},
          "rows": {"type": "array", "description": "By environment, then product id.", "items": {"$ref": "#/components/schemas/PurchaseReportRow"}}
        }
      },
      "AppStoreNotificationV1": {
        "type": "object",
        "description": "A version 1 App Store Server Notification; `password` must equal the shared secret.",
        "required": ["notification_type", "password"],
        "properties": {
          "notification_type": {"type": "string", "examples": ["DID_RENEW", "CANCEL", "INITIAL_BUY"]},
          "password": {"type": "string"},
          "environment": {"type": "string", "examples": ["PROD", "Sandbox"]},
          "bid": {"type": "string"},
          "bvrs": {"type": "string"},
          "auto_renew_status": {"type": ["string", "boolean"]},
          "auto_renew_product_id": {"type": "string"},
          "original_transaction_id": {"type": ["string", "integer"]},
          "unified_receipt": {
            "type": "object",
            "properties": {
              "environment": {"type": "string"},
              "latest_receipt": {"type": "string"},
              "latest_receipt_info": {"type": "array", "items": {"type": "object"}},
              "pending_renewal_info": {"type": "array", "items": {"type": "object"}},
              "status": {"type": "integer"}
            }
          }
        }
      },
      "AppStoreNotificationV2": {
        "type": "object",
        "description": "A version 2 App Store Server Notification: a JWS signed by Apple's certificate chain.",
        "required": ["signedPayload"],
        "properties": {
          "signedPayload": {"type": "string", "minLength": 1}
        }
      },
      "AppStoreNotification": {
        "anyOf": [
          {"$ref": "#/components/schemas/AppStoreNotificationV1"},
          {"$ref": "#/components/schemas/AppStoreNotificationV2"}
        ]
      }
    }
    """#
}
