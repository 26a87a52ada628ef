import EntitlementModel
import Foundation
import Testing
@testable import EntitlementService
@testable import ServiceRuntime

/// A user's events follow the order of the changes they tell: a writer judges the user at the time it holds the
/// user's head, not at the time its request began, so a change committed while it waited is in its past.
@Suite struct EventOrderTests {
    @Test @Loop func aGrantWhoseRequestBeganBeforeAnotherCommittedSeesIt() async throws {
        try await TestDatabase.withMigratedDatabase { _, pool in
            let events = EventRecorder(catalog: CatalogCache(db: pool), delivers: false)
            let editor = GrantEditor(db: pool, events: events)
            let now = Date()
            // The second request read its clock 5 s before the first one's grant (longer) was committed: it waited.
            let longer = GrantStore.wholeSecond(now).addingTimeInterval(30 * 86_400)
            _ = try await editor.create(userID: "u", entitlement: "beta", expiresAt: longer, reason: "first", actor: "admin#1", now: now)
            _ = try await editor.create(userID: "u", entitlement: "beta", expiresAt: longer.addingTimeInterval(-86_400), reason: "second",
                                        actor: "admin#1", now: now.addingTimeInterval(-5))

            // The shorter grant changes nothing visible: no event that steps back to it.
            let rows = try await pool.query("SELECT type, payload FROM webhook_events WHERE user_id = 'u' ORDER BY sequence").rows
            #expect(try rows.map { try $0.string("type") } == ["grant"])
            let payload = try JSONSerialization.jsonObject(with: Data(try #require(rows.last).string("payload").utf8)) as? [String: Any]
            let beta = (payload?["entitlements"] as? [String: Any])?["beta"] as? [String: Any]
            #expect(beta?["expires_at"] as? String == RFC3339.string(from: longer))
        }
    }
}
