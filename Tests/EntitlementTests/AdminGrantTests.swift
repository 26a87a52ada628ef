import EntitlementModel
import Foundation
import Testing
@testable import AppStore
@testable import EntitlementService
@testable import FakeAppStore
@testable import ServiceRuntime

extension AdminTests {
    /// Grants over real HTTP: made with a duration, an end time or for life, revoked, validated field by field,
    /// and seen through `GET /v1/users/{user_id}/entitlements` beside App Store purchases.
    @Suite struct AdminGrantTests {
        static func grant(_ service: AdminHarness, user: String, _ fields: [String: Any]) async throws -> [String: Any] {
            let reply = try await service.call("POST", "/v1/admin/users/\(AdminHarness.encodePath(user))/grants", body: AdminHarness.json(fields))
            #expect(reply.status == 201, "\(reply)")
            return reply.object
        }

        static func date(_ value: Any?) -> Date? {
            (value as? String).flatMap(RFC3339.date(from:))
        }

        @Test @Loop func durationEndTimeAndLifetimeGrants() async throws {
            try await AdminHarness.run { service in
                let before = GrantStore.wholeSecond(Date())
                let week = try await Self.grant(service, user: "u1", ["entitlement": "premium", "duration": "P7D", "reason": "ticket 1"])
                let created = try #require(Self.date(week["created_at"]))
                #expect(created >= before && created <= Date())
                #expect(Self.date(week["expires_at"]) == created.addingTimeInterval(7 * 86_400))
                #expect(week["revoked_at"] is NSNull)
                #expect(week["created_by"] as? String == "admin#1")
                #expect(week["user_id"] as? String == "u1")

                let premium = try #require(try await service.entitlement("premium", of: "u1"))
                #expect(premium["active"] as? Bool == true)
                #expect(premium["source"] as? String == "grant")
                #expect(premium["grant_id"] as? String == week["grant_id"] as? String)
                #expect(premium["reason"] as? String == "ticket 1")
                #expect(Self.date(premium["expires_at"]) == Self.date(week["expires_at"]))
                // Seen from its own created_at (whole seconds) on, gone after its end.
                #expect(try await service.entitlement("premium", of: "u1", at: created)?["active"] as? Bool == true)
                let ended = try await service.entitlement("premium", of: "u1", at: created.addingTimeInterval(8 * 86_400))
                #expect(ended?["active"] as? Bool == false)
                #expect(ended?["inactive_reason"] as? String == "expired")

                let end = "2030-06-01T12:00:00Z"
                let dated = try await Self.grant(service, user: "u2", ["entitlement": "pro", "expires_at": end, "reason": "partner"])
                #expect(dated["expires_at"] as? String == end)
                #expect(try await service.entitlement("pro", of: "u2")?["active"] as? Bool == true)
                let offset = try await Self.grant(service, user: "u2", ["entitlement": "extra", "expires_at": "2030-06-01T14:00:00+02:00", "reason": "offset"])
                #expect(offset["expires_at"] as? String == end)
                // A fraction of a second is cut, as answers show times: the answer is what is stored, even where
                // rounding the fraction would reach the next second.
                let fraction = try await Self.grant(service, user: "u4", ["entitlement": "pro", "expires_at": "2030-06-01T12:00:00.9999995Z", "reason": "cut"])
                #expect(fraction["expires_at"] as? String == end)
                #expect(try await service.entitlement("pro", of: "u4")?["expires_at"] as? String == end)
                #expect(try await service.sql("SELECT expires_at = '2030-06-01T12:00:00Z' AS whole FROM grants WHERE user_id = 'u4'").first?.bool("whole") == true)

                let lifetime = try await Self.grant(service, user: "u3", ["entitlement": "pro", "reason": "founder", "expires_at": NSNull()])
                #expect(lifetime["expires_at"] is NSNull)
                let pro = try #require(try await service.entitlement("pro", of: "u3", at: RFC3339.date(from: "2999-01-01T00:00:00Z")))
                #expect(pro["active"] as? Bool == true)
                #expect(pro["expires_at"] is NSNull)
            }
        }

        @Test @Loop func revokingIsIdempotentAndShowsInEntitlements() async throws {
            try await AdminHarness.run { service in
                let grant = try await Self.grant(service, user: "u1", ["entitlement": "premium", "reason": "trial"])
                let id = try #require(grant["grant_id"] as? String)
                let revoked = try await service.call("DELETE", "/v1/admin/grants/\(id)")
                #expect(revoked.status == 200, "\(revoked)")
                #expect(revoked.object["revoked_by"] as? String == "admin#1")
                let revokedAt = try #require(Self.date(revoked.object["revoked_at"]))

                let premium = try #require(try await service.entitlement("premium", of: "u1"))
                #expect(premium["active"] as? Bool == false)
                #expect(premium["inactive_reason"] as? String == "revoked")

                let again = try await service.call("DELETE", "/v1/admin/grants/\(id.uppercased())")
                #expect(again.status == 200, "\(again)")
                #expect(Self.date(again.object["revoked_at"]) == revokedAt)
                let audits = try await service.sql("SELECT count(*) AS n FROM audit_events WHERE action = 'grant.revoke'")
                #expect(try audits[0].int("n") == 1)

                let unknown = try await service.call("DELETE", "/v1/admin/grants/\(UUID().uuidString.lowercased())")
                #expect(unknown.status == 404, "\(unknown)")
                #expect(unknown.field == "grant_id")
                // A text that is not a UUID is the id of no grant; nor is a NUL and more after the grant's id (Foundation
                // alone would stop reading at the NUL).
                for path in ["not-a-uuid", "\(id)%00garbage", "\(id)%00", "\(id)x"] {
                    let malformed = try await service.call("DELETE", "/v1/admin/grants/\(path)")
                    #expect(malformed.status == 404 && malformed.field == "grant_id", "\(path): \(malformed)")
                }
                let stored = try await service.sql("SELECT revoked_by FROM grants WHERE grant_id = $1::uuid", [id])
                #expect(try stored[0].string("revoked_by") == "admin#1")
            }
        }

        /// Grants are kept in whole seconds: those given in one second come back newest first all the same.
        @Test @Loop func grantsGivenInOneSecondListNewestFirst() async throws {
            try await AdminHarness.run { service in
                var given: [String] = []
                for index in 1...6 {
                    let grant = try await Self.grant(service, user: "u1", ["entitlement": "e\(index)", "reason": "batch"])
                    given.append(try #require(grant["grant_id"] as? String))
                }
                // Make the ties certain whatever second each was given in.
                _ = try await service.sql("UPDATE grants SET created_at = '2026-03-01T00:00:00Z' WHERE user_id = 'u1'")
                let view = try await service.call("GET", "/v1/admin/users/u1")
                #expect(view.status == 200, "\(view)")
                let listed = (view.object["grants"] as? [[String: Any]])?.compactMap { $0["grant_id"] as? String }
                #expect(listed == given.reversed(), "\(view)")
            }
        }

        @Test @Loop func everyBadFieldIsNamed() async throws {
            try await AdminHarness.run { service in
                let cases: [(String, String)] = [
                    (#"{"entitlement": "premium", "reason": "x", "expires_at": "2030-01-01T00:00:00Z", "duration": "P1M"}"#, "duration"),
                    (#"{"entitlement": "premium"}"#, "reason"),
                    (#"{"reason": "x"}"#, "entitlement"),
                    (#"{"entitlement": "premium", "reason": "   "}"#, "reason"),
                    (#"{"entitlement": "", "reason": "x"}"#, "entitlement"),
                    (#"{"entitlement": "pre\u0000mium", "reason": "x"}"#, "entitlement"),
                    (#"{"entitlement": 7, "reason": "x"}"#, "entitlement"),
                    (#"{"entitlement": "premium", "reason": "x", "expires_at": "tomorrow"}"#, "expires_at"),
                    (#"{"entitlement": "premium", "reason": "x", "expires_at": "2030-02-30T00:00:00Z"}"#, "expires_at"),
                    (#"{"entitlement": "premium", "reason": "x", "duration": "1 month"}"#, "duration"),
                    (#"{"entitlement": "premium", "reason": "x", "duration": "P0D"}"#, "duration"),
                    (#"{"entitlement": "premium", "reason": "x", "duration": "P999999Y"}"#, "duration"),
                    (#"{"entitlement": "premium", "reason": "x", "duration": 30}"#, "duration"),
                    ("{\"entitlement\": \"premium\", \"reason\": \"\(String(repeating: "r", count: 1_001))\"}", "reason"),
                ]
                for (body, field) in cases {
                    let reply = try await service.call("POST", "/v1/admin/users/u1/grants", body: body)
                    #expect(reply.status == 400, "\(body): \(reply)")
                    #expect(reply.field == field, "\(body): \(reply)")
                    #expect(reply.contentType == "application/problem+json")
                }
                for body in ["", "{", "[]", "null"] {
                    #expect(try await service.call("POST", "/v1/admin/users/u1/grants", body: body).status == 400, "\(body)")
                }
                let latin1 = try await service.call("POST", "/v1/admin/users/u1/grants",
                                                    bytes: Array(#"{"entitlement": "pr"#.utf8) + [0xE9] + Array(#"mium", "reason": "x"}"#.utf8))
                #expect(latin1.status == 400)
                #expect(latin1.text.contains("UTF-8"))

                let long = String(repeating: "u", count: 129)
                let tooLong = try await service.call("POST", "/v1/admin/users/\(long)/grants", body: #"{"entitlement": "a", "reason": "x"}"#)
                #expect(tooLong.status == 400)
                #expect(tooLong.field == "user_id")
                // Lengths count Unicode scalars, as the OpenAPI document's maxLength does: 65 accented letters are 130.
                let accents = try await service.call("POST", "/v1/admin/users/\(AdminHarness.encodePath(String(repeating: "e\u{301}", count: 65)))/grants",
                                                     body: #"{"entitlement": "a", "reason": "x"}"#)
                #expect(accents.status == 400)
                #expect(accents.field == "user_id")
                let badEscape = try await service.call("POST", "/v1/admin/users/%FF%FE/grants", body: #"{"entitlement": "a", "reason": "x"}"#)
                #expect(badEscape.status == 400)
                #expect(badEscape.field == "user_id")
                let control = try await service.call("POST", "/v1/admin/users/a%0Ab/grants", body: #"{"entitlement": "a", "reason": "x"}"#)
                #expect(control.status == 400)
                #expect(control.field == "user_id")
                let rawByte = try await service.send(raw: Array("GET /v1/users/a".utf8) + [0xFF]
                    + Array("b/entitlements HTTP/1.1\r\nHost: h\r\nConnection: close\r\nAuthorization: Bearer \(service.adminKey)\r\n\r\n".utf8))
                #expect(rawByte.status == 400, "\(rawByte)")
                #expect(try await service.sql("SELECT 1 FROM grants").isEmpty)

                // Percent-encoded ids are decoded; unknown fields are ignored; 128 characters are fine.
                let spaced = try await Self.grant(service, user: "user one/é", ["entitlement": "premium", "reason": "x", "colour": "blue"])
                #expect(spaced["user_id"] as? String == "user one/é")
                #expect(try await service.entitlement("premium", of: "user one/é")?["active"] as? Bool == true)
                _ = try await Self.grant(service, user: String(repeating: "u", count: 128), ["entitlement": "premium", "reason": "x"])
            }
        }

        @Test @Loop func grantsStandBesideAnActiveSubscription() async throws {
            try await AdminHarness.run { service in
                let now = Date()
                var receipt = FakeReceipt(bundleID: AdminHarness.bundleID)
                receipt.addSubscription("com.example.premium.monthly", originalTransactionID: "7000001",
                                        start: now.addingTimeInterval(-86_400), period: ISODuration(months: 1))
                let posted = try await service.post(receipt, for: "subscriber")
                #expect(posted.status == 200, "\(posted)")
                let bought = (posted.object["entitlements"] as? [String: Any])?["premium"] as? [String: Any]
                let storeExpiry = try #require(Self.date(bought?["expires_at"]))

                // A shorter grant does not shorten the purchase.
                _ = try await Self.grant(service, user: "subscriber", ["entitlement": "premium", "duration": "P1D", "reason": "short"])
                var premium = try #require(try await service.entitlement("premium", of: "subscriber"))
                #expect(premium["source"] as? String == "app_store")
                #expect(Self.date(premium["expires_at"]) == storeExpiry)

                // A longer one shows instead, until it is revoked.
                let long = try await Self.grant(service, user: "subscriber", ["entitlement": "premium", "duration": "P1Y", "reason": "long"])
                premium = try #require(try await service.entitlement("premium", of: "subscriber"))
                #expect(premium["source"] as? String == "grant")
                #expect(premium["grant_id"] as? String == long["grant_id"] as? String)
                // Once the subscription has lapsed, the grant alone still gives it.
                let later = try await service.entitlement("premium", of: "subscriber", at: storeExpiry.addingTimeInterval(86_400))
                #expect(later?["active"] as? Bool == true)
                #expect(later?["source"] as? String == "grant")

                let id = try #require(long["grant_id"] as? String)
                #expect(try await service.call("DELETE", "/v1/admin/grants/\(id)").status == 200)
                premium = try #require(try await service.entitlement("premium", of: "subscriber"))
                #expect(premium["source"] as? String == "app_store")
                #expect(premium["active"] as? Bool == true)
            }
        }
    }
}
