import EntitlementModel
import Foundation
import Testing
@testable import EntitlementService
@testable import ServiceRuntime

/// A user's events are claimed for delivery one at a time in sequence order while the receiver answers (migration
/// 0019); an earlier event waiting for a later retry holds none back.
@Suite struct WebhookClaimOrderTests {
    @Test @Loop func aUsersEventsAreClaimedInSequenceOneAtATime() async throws {
        try await TestDatabase.withMigratedDatabase { _, pool in
            let editor = GrantEditor(db: pool, events: EventRecorder(catalog: CatalogCache(db: pool), delivers: true))
            for (user, entitlement) in [("u", "a"), ("u", "b"), ("u", "c"), ("v", "a")] {
                _ = try await editor.create(userID: user, entitlement: entitlement, expiresAt: nil, reason: "test", actor: "admin#1", now: Date())
            }
            let store = WebhookDeliveryStore()
            let sequences = { @Loop (claims: [DeliveryClaim]) async throws -> [String] in
                try await pool.query("SELECT user_id || sequence AS s FROM webhook_events WHERE event_id = ANY($1) ORDER BY 1",
                                     [claims.map(\.eventID)]).rows.map { try $0.string("s") }
            }
            let now = Date().addingTimeInterval(1)
            let first = try await store.claimDue(limit: 10, now: now, leaseMs: 60_000, on: pool)
            #expect(try await sequences(first) == ["u1", "v1"])
            #expect(try await store.claimDue(limit: 10, now: now, leaseMs: 60_000, on: pool).isEmpty, "u1 is being sent")

            // u1 delivered: u2 is next. u2 refused, to be retried in a minute: u3 is not held back by it.
            let u1 = try await pool.query("SELECT event_id FROM webhook_events WHERE user_id = 'u' AND sequence = 1").rows[0].uuid("event_id")
            let delivered = first.filter { $0.eventID == u1 }.map {
                DeliveryOutcome(claim: $0, decision: .delivered, responseStatus: 200, error: nil, finishedAt: now)
            }
            try await store.record(delivered, on: pool)
            let second = try await store.claimDue(limit: 10, now: now, leaseMs: 60_000, on: pool)
            #expect(try await sequences(second) == ["u2"])
            try await store.record(second.map {
                DeliveryOutcome(claim: $0, decision: .retry(at: now.addingTimeInterval(60)), responseStatus: 500, error: nil, finishedAt: now)
            }, on: pool)
            #expect(try await sequences(try await store.claimDue(limit: 10, now: now, leaseMs: 60_000, on: pool)) == ["u3"])
        }
    }
}
