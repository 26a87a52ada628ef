import EntitlementModel
import Foundation
import Testing
@testable import AppStore
@testable import EntitlementService
@testable import FakeAppStore
@testable import ServiceRuntime

extension AdminTests {
    /// Keys and scopes over real HTTP against the whole service: every admin route refuses a missing or wrong
    /// key (401) and an app key (403) and serves an admin key; admin keys also work on app routes; no key ever
    /// shows up in an answer or a log line.
    @Suite struct AdminAccessTests {
        /// One request to every admin route, each valid for an admin; `grantID` names a grant that exists.
        static func adminRoutes(grantID: String) -> [(method: String, target: String, body: String?)] {
            [
                ("POST", "/v1/admin/users/u1/grants", #"{"entitlement": "premium", "reason": "access test"}"#),
                ("DELETE", "/v1/admin/grants/\(grantID)", nil),
                ("PUT", "/v1/admin/products/com.example.access", #"{"type": "non_consumable", "entitlements": ["gold"]}"#),
                ("GET", "/v1/admin/products", nil),
                ("GET", "/v1/admin/audit", nil),
                ("GET", "/v1/admin/reports/purchases?from=2026-01-01T00:00:00Z&to=2027-01-01T00:00:00Z", nil),
            ]
        }

        @Test @Loop func everyAdminRouteWantsAnAdminKey() async throws {
            try await AdminHarness.run { service in
                let created = try await service.call("POST", "/v1/admin/users/u1/grants",
                                                     body: #"{"entitlement": "premium", "reason": "to revoke"}"#)
                #expect(created.status == 201, "\(created)")
                let grantID = try #require(created.object["grant_id"] as? String)

                for route in Self.adminRoutes(grantID: grantID) {
                    let label = "\(route.method) \(route.target)"
                    let refusals: [(AdminHarness.Key, Int)] = [
                        (.none, 401), (.header("Bearer wrong-\(service.adminKey)"), 401), (.header("Bearer "), 401),
                        (.header("Basic \(service.adminKey)"), 401), (.header("Bearer \(service.adminKey.dropLast())"), 401),
                        (.app, 403),
                    ]
                    for (key, status) in refusals {
                        let reply = try await service.call(route.method, route.target, key: key, body: route.body)
                        #expect(reply.status == status, "\(label) with \(key): \(reply)")
                        #expect(reply.contentType == "application/problem+json", "\(label) with \(key)")
                        #expect(!reply.text.contains("wrong-"), "\(label) echoed the presented key")
                        #expect(reply.headers["WWW-Authenticate"] == (status == 401 ? "Bearer" : nil), "\(label) with \(key)")
                        #expect(reply.headers["Cache-Control"] == "no-store", "\(label) with \(key)")
                    }
                    let reply = try await service.call(route.method, route.target, key: .admin, body: route.body)
                    #expect((200..<300).contains(reply.status), "\(label): \(reply)")
                    #expect(reply.contentType == "application/json", "\(label)")
                    #expect(reply.headers["Cache-Control"] == "no-store", "\(label)")
                }
                // A query that gives a name twice is refused for an app key first (403), then for the name (400).
                #expect(try await service.call("GET", "/v1/admin/audit?limit=5&limit=6", key: .app).status == 403)
                let twice = try await service.call("GET", "/v1/admin/audit?limit=5&limit=6", key: .admin)
                #expect(twice.status == 400 && twice.object["field"] as? String == "limit", "\(twice)")
                // So is a value that does not decode, named, on the app's routes too (not a fault of the HTTP message).
                let malformed = try await service.call("GET", "/v1/users/u1/entitlements?at=%zz", key: .app)
                #expect(malformed.status == 400 && malformed.field == "at", "\(malformed)")
                // The refused requests changed nothing: one grant made and revoked once, one more grant, one product.
                let actions = try await service.sql("SELECT action, actor FROM audit_events ORDER BY event_id")
                #expect(try actions.map { try $0.string("action") } == ["grant.create", "grant.create", "grant.revoke", "product.put"])
                #expect(try actions.allSatisfy { try $0.string("actor") == "admin#1" })
            }
        }

        @Test @Loop func adminKeysCallAppRoutesAndAppKeysStayOutOfAdmin() async throws {
            try await AdminHarness.run { service in
                for key in [AdminHarness.Key.admin, .app, .header("bearer \(service.adminKey)")] {
                    let reply = try await service.call("GET", "/v1/users/u1/entitlements", key: key)
                    #expect(reply.status == 200, "\(key): \(reply)")
                    #expect(reply.headers["Cache-Control"] == "no-store", "entitlements are per user: never cached")
                }
                let order = try await service.call("POST", "/v1/orders", key: .admin,
                                                   body: #"{"user_id": "u1", "product_id": "com.example.lifetime"}"#)
                #expect(order.status == 201, "\(order)")
                let refused = try await service.call("GET", "/v1/users/u1/entitlements", key: .none)
                #expect(refused.status == 401)
                #expect(refused.field == "Authorization")
                #expect(refused.headers["WWW-Authenticate"] == "Bearer")
                for path in ["/v1/users/u1/transactions", "/v1/orders/00000000-0000-0000-0000-000000000000", "/v1/receipts/not-a-uuid"] {
                    let reply = try await service.call("GET", path, key: .app)
                    #expect(reply.status != 401 && reply.headers["Cache-Control"] == "no-store", "\(path): \(reply)")
                }
                #expect(try await service.call("GET", "/healthz", key: .none).headers["Cache-Control"] == nil)
                #expect(try await service.call("GET", "/v1/admin/products", key: .app).status == 403)
                // Authorization given twice is no valid key, whichever order and whatever each says.
                for pair in [(service.adminKey, service.appKey), (service.appKey, service.adminKey), (service.adminKey, service.adminKey)] {
                    let twice = try await service.call("GET", "/v1/users/u1/entitlements",
                                                       key: .header("Bearer \(pair.0)\r\nAuthorization: Bearer \(pair.1)"))
                    #expect(twice.status == 401 && twice.field == "Authorization", "\(twice)")
                }
            }
        }

        /// Runs the built executable, so that every line it logs can be read without touching this process's
        /// standard error; the receipt goes through the fake App Store with the shared secret.
        @Test @Loop func keysAndTheSharedSecretNeverReachTheLog() async throws {
            var secrets: [String] = []
            let service = try await AdminHarness.run(process: true) { service in
                let guess = "guess-" + randomToken()
                secrets = [service.appKey, service.adminKey, service.sharedSecret, guess]
                #expect(try await service.call("GET", "/v1/admin/products", key: .header("Bearer \(guess)")).status == 401)
                #expect(try await service.call("GET", "/v1/admin/products", key: .app).status == 403)
                #expect(try await service.call("POST", "/v1/admin/users/u1/grants", key: .admin,
                                               body: #"{"entitlement": "premium", "reason": "log test"}"#).status == 201)
                #expect(try await service.call("POST", "/v1/admin/users/u1/grants", key: .admin, body: #"{"entitlement": 1}"#).status == 400)
                #expect(try await service.call("PUT", "/v1/admin/products/x", key: .admin, body: #"{"type": "nope"}"#).status == 400)
                #expect(try await service.call("GET", "/v1/admin/audit?cursor=zzz", key: .admin).status == 400)
                var receipt = FakeReceipt(bundleID: AdminHarness.bundleID)
                receipt.addPurchase("com.example.lifetime", transactionID: "8100001", purchased: Date().addingTimeInterval(-60))
                #expect(try await service.post(receipt, for: "u1").status == 200)
                let rows = try await service.sql("SELECT actor, coalesce(before::text, '') || coalesce(after::text, '') AS state FROM audit_events")
                #expect(rows.count == 1)
                for row in rows {
                    #expect(try row.string("actor") == "admin#1")
                    #expect(try !row.string("state").contains(service.adminKey))
                }
                return service
            }
            let log = service.log
            #expect(log.contains("event=grant_created "), "the service's log was read: \(log.prefix(500))")
            #expect(log.contains("event=apple_verify"), "\(log.prefix(500))")
            for secret in secrets {
                #expect(!log.contains(secret), "a key or the shared secret reached the log")
            }
        }
    }
}
