import Foundation
import Testing
@testable import EntitlementService
@testable import FakeAppStore
@testable import ServiceRuntime

/// What only real processes show: the service SIGKILLed ten times during a burst of changes loses no event.
/// Every change that committed has its event (written in the same transaction), and every event reaches the
/// receiver (written with the `standardwebhooks` package) at least once, with a signature it verifies.
@Suite(.serialized, .timeLimit(.minutes(3)))
@Loop
struct WebhookCrashTests {
    private func grant(port: Int, user: String, entitlement: String) async throws -> RawHTTPClient.Response {
        let text = RawHTTPClient.request("POST", "/v1/admin/users/\(user)/grants",
                                         headers: [("Authorization", "Bearer \(ServiceHarness.adminKey)"), ("Content-Type", "application/json")],
                                         body: #"{"entitlement": "\#(entitlement)", "reason": "burst"}"#)
        return try await RawHTTPClient.exchange(port: port, text, timeout: 10)
    }

    @Test func tenKillsDuringABurstLoseNoEvent() async throws {
        let receiver = try await offLoop { try WebhookReceiver() }
        let setup = try await TestService.prepare(
            "crash", catalog: ServiceHarness.catalog, bundleID: ServiceHarness.bundleID,
            fake: FakeAppStoreConfiguration(sharedSecret: ServiceHarness.sharedSecret),
            environment: receiver.environment.merging([
                "ADMIN_API_KEYS": ServiceHarness.adminKey, "WEBHOOK_TIMEOUT_MS": "1000", "WEBHOOK_RETRY_BASE_MS": "50",
                "WEBHOOK_RETRY_MAX_MS": "200", "DATABASE_POOL_SIZE": "4",
            ]) { $1 })
        var answered = 0
        for round in 0..<10 {
            let environment = setup.environment
            let service = try await offLoop { try ServiceProcess(environment: environment) }
            let port = service.port
            // Eight writers, each changing its own users one grant after another, until the kill cuts them off.
            let writers = (0..<8).map { writer in
                Task { @Loop () -> Int in
                    var created = 0
                    for index in 0..<1_000 {
                        guard let answer = try? await grant(port: port, user: "crash-\(writer)-\(index % 3)", entitlement: "r\(round)-\(index)"),
                              answer.status == 201 else { return created }
                        created += 1
                    }
                    return created
                }
            }
            // Kill once the burst is under way: some changes answered, others in flight, events being sent.
            _ = await eventually(timeout: 10, everyMs: 5) { (try? await receiver.tally().events.count) ?? 0 > round * 10 + 5 }
            service.signal(SIGKILL)
            _ = try await offLoop { service.waitForExit(timeout: 10) }
            for writer in writers { answered += await writer.value }
        }
        #expect(answered > 50, "the bursts made changes (\(answered) answered)")

        // One more start delivers whatever the killed ones left: claims whose sender died come due again.
        let environment = setup.environment
        let survivor = try await offLoop { try ServiceProcess(environment: environment) }
        let settled = try await eventually(timeout: 30, everyMs: 100) {
            try await setup.sql("SELECT 1 FROM webhook_events WHERE delivery_status <> 'delivered'").isEmpty
        }
        #expect(settled, "\(survivor.log.suffix(2_000))")

        let grants = try await setup.sql("SELECT count(*)::int AS n FROM grants").first?.int("n") ?? 0
        let events = try await setup.sql("SELECT event_id::text AS id, type FROM webhook_events")
        #expect(grants >= answered, "every answered change committed")
        #expect(events.count == grants, "one event per committed change, none without")
        #expect(try events.allSatisfy { try $0.string("type") == "grant" })
        let tally = try await receiver.tally()
        let kept = Set(tally.events.map(\.id))
        let written = Set(try events.map { try $0.string("id") })
        #expect(written.isSubset(of: kept), "\(written.subtracting(kept).count) events never arrived")
        #expect(tally.invalid == 0)
        let sequences = try await setup.sql("""
            SELECT user_id, count(*)::int AS n, max(sequence)::int AS last FROM webhook_events GROUP BY user_id
            """)
        #expect(try sequences.allSatisfy { try $0.int("n") == $0.int("last") }, "sequences without gaps per user")
        survivor.signal(SIGKILL)
        _ = try await offLoop { survivor.waitForExit(timeout: 10) }
        await setup.tearDown()
    }
}

extension TestService: ServiceDatabase {}
