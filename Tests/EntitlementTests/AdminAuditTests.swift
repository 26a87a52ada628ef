import EntitlementModel
import Foundation
import Testing
@testable import AppStore
@testable import EntitlementService
@testable import FakeAppStore
@testable import ServiceRuntime

extension AdminTests {
    /// The audit log over real HTTP: what each admin action and each ownership transfer leaves, newest first,
    /// paged by cursor and filtered.
    @Suite struct AdminAuditTests {
        @Test @Loop func adminActionsAndTransfersAreAudited() async throws {
            try await AdminHarness.run { service in
                let grant = try await service.call("POST", "/v1/admin/users/u1/grants", body: #"{"entitlement": "premium", "reason": "audit"}"#)
                let id = try #require(grant.object["grant_id"] as? String)
                #expect(try await service.call("DELETE", "/v1/admin/grants/\(id)").status == 200)
                #expect(try await service.call("PUT", "/v1/admin/products/com.example.audit",
                                               body: #"{"type": "non_consumable", "entitlements": ["a"]}"#).status == 201)
                // A failed change leaves nothing.
                #expect(try await service.call("DELETE", "/v1/admin/grants/\(UUID().uuidString)").status == 404)

                var receipt = FakeReceipt(bundleID: AdminHarness.bundleID)
                receipt.addPurchase("com.example.lifetime", transactionID: "9100001", purchased: Date().addingTimeInterval(-3_600))
                #expect(try await service.post(receipt, for: "first").status == 200)
                let moved = try await service.post(receipt, for: "second")
                #expect(moved.status == 200, "\(moved)")
                #expect(moved.object["transferred_from"] as? String == "first")

                let page = try await service.call("GET", "/v1/admin/audit")
                #expect(page.status == 200, "\(page)")
                let events = try #require(page.object["events"] as? [[String: Any]])
                #expect(events.compactMap { $0["action"] as? String } == ["ownership.transfer", "product.put", "grant.revoke", "grant.create"])
                #expect(events.compactMap { $0["actor"] as? String } == ["app#1", "admin#1", "admin#1", "admin#1"])
                #expect(page.object["next_cursor"] is NSNull)
                let ids = events.compactMap { $0["event_id"] as? Int }
                #expect(ids == ids.sorted(by: >))

                let transfer = events[0]
                #expect(transfer["subject"] as? String == "9100001")
                #expect(transfer["user_id"] as? String == "second")
                #expect((transfer["before"] as? [String: Any])?["user_id"] as? String == "first")
                #expect((transfer["after"] as? [String: Any])?["user_id"] as? String == "second")
                // Filtered by either side, the transfer is there: it is about the user it left too.
                for side in ["first", "second"] {
                    let filtered = try await service.call("GET", "/v1/admin/audit?user_id=\(side)&action=ownership.transfer")
                    #expect((filtered.object["events"] as? [[String: Any]])?.compactMap { $0["subject"] as? String } == ["9100001"], "\(side)")
                }

                let revoke = events[2]
                #expect(revoke["subject"] as? String == id)
                #expect(revoke["user_id"] as? String == "u1")
                #expect((revoke["before"] as? [String: Any])?["revoked_at"] is NSNull)
                #expect((revoke["after"] as? [String: Any])?["revoked_at"] is String)
                #expect((revoke["after"] as? [String: Any])?["revoked_by"] as? String == "admin#1")
                let create = events[3]
                #expect(create["before"] is NSNull)
                #expect((create["after"] as? [String: Any])?["reason"] as? String == "audit")
                #expect((events[1]["before"]) is NSNull)
                #expect((events[1]["user_id"]) is NSNull)
                #expect(RFC3339.date(from: create["occurred_at"] as? String ?? "") != nil)
                #expect(!page.text.contains(service.adminKey) && !page.text.contains(service.appKey))
            }
        }

        @Test @Loop func pagesFollowTheCursorAndFiltersApply() async throws {
            try await AdminHarness.run { service in
                for index in 0..<5 {
                    let user = index % 2 == 0 ? "even" : "odd"
                    #expect(try await service.call("POST", "/v1/admin/users/\(user)/grants",
                                                   body: "{\"entitlement\": \"e\(index)\", \"reason\": \"r\"}").status == 201)
                }
                var seen: [String] = []
                var cursor: String?
                var pages = 0
                repeat {
                    let query = "/v1/admin/audit?limit=2" + (cursor.map { "&cursor=\($0)" } ?? "")
                    let page = try await service.call("GET", query)
                    #expect(page.status == 200, "\(page)")
                    let events = page.object["events"] as? [[String: Any]] ?? []
                    seen += events.compactMap { ($0["after"] as? [String: Any])?["entitlement"] as? String }
                    cursor = page.object["next_cursor"] as? String
                    pages += 1
                } while cursor != nil && pages < 10
                #expect(seen == ["e4", "e3", "e2", "e1", "e0"])
                #expect(pages == 3)

                let odd = try await service.call("GET", "/v1/admin/audit?user_id=odd")
                #expect((odd.object["events"] as? [[String: Any]])?.compactMap { $0["user_id"] as? String } == ["odd", "odd"])
                let none = try await service.call("GET", "/v1/admin/audit?action=grant.revoke")
                #expect((none.object["events"] as? [[String: Any]])?.isEmpty == true)
                let creates = try await service.call("GET", "/v1/admin/audit?action=grant.create&user_id=even&limit=500")
                #expect((creates.object["events"] as? [[String: Any]])?.count == 3)

                for (query, field) in [("limit=0", "limit"), ("limit=501", "limit"), ("limit=ten", "limit"), ("cursor=abc", "cursor"),
                                       ("cursor=%2F%2F", "cursor"), ("user_id=%00", "user_id"), ("action=a%20b", "action"),
                                       ("action=%C3%97", "action")] {
                    let reply = try await service.call("GET", "/v1/admin/audit?\(query)")
                    #expect(reply.status == 400, "\(query): \(reply)")
                    #expect(reply.field == field, "\(query): \(reply)")
                }
            }
        }

        @Test func cursorsRoundTripAndRejectForgeries() {
            let cursor = AuditCursor(occurredMicroseconds: 1_780_000_000_123_456, eventID: 42)
            #expect(AuditCursor(text: cursor.text) == cursor)
            #expect(!cursor.text.contains("="))
            let negative = AuditCursor(occurredMicroseconds: -5, eventID: 1)
            #expect(AuditCursor(text: negative.text) == negative)
            for forged in ["", "abc", "djE6MTox*", Data("v2:1:1".utf8).base64EncodedString(), Data("v1:1:0".utf8).base64EncodedString(),
                           Data("v1:x:1".utf8).base64EncodedString(), Data("v1:999999999999999999:1".utf8).base64EncodedString(),
                           String(repeating: "A", count: 65)] {
                #expect(AuditCursor(text: forged) == nil, "\(forged)")
            }
        }
    }
}
