import EntitlementModel
import Foundation
import Testing
@testable import EntitlementService
@testable import ServiceRuntime

/// The entitlement cache as the service runs it: `GET /v1/users/{user_id}/entitlements` through the real
/// HTTP service, writes through the admin routes (behind `ChangeBarrier`), the listener on the real database.
@Suite struct EntitlementCacheRouteTests {
    /// How many writes the stale-read test makes, each followed by two reads (the issue asks for 10,000 alternations).
    static let alternations = 10_000

    static func grant(_ service: AdminHarness, _ user: String, _ fields: [String: Any] = [:]) async throws -> String {
        let body = ["entitlement": "premium", "reason": "cache test"].merging(fields) { _, new in new }
        let reply = try await service.call("POST", "/v1/admin/users/\(user)/grants", body: AdminHarness.json(body))
        guard reply.status == 201, let id = reply.object["grant_id"] as? String else { throw TestSetupError("grant answered \(reply)") }
        return id
    }

    static func isActive(_ service: AdminHarness, _ user: String, at: Date? = nil) async throws -> Bool {
        try await service.entitlement("premium", of: user, at: at)?["active"] as? Bool == true
    }

    @Loop static func cache(_ service: AdminHarness) throws -> EntitlementCache {
        try #require(service.application).cache
    }

    /// The service's cache once it serves, and a new user (`prefix` and a random token) granted premium, whose
    /// answer the cache now holds.
    @Loop static func heldUser(_ service: AdminHarness, _ prefix: String) async throws -> (EntitlementCache, String) {
        let cache = try Self.cache(service)
        #expect(await eventually(timeout: 10) { cache.isServing })
        let user = prefix + randomToken()
        _ = try await Self.grant(service, user)
        #expect(try await Self.isActive(service, user))
        return (cache, user)
    }

    /// Once a write has answered, every read on the same instance sees it: a grant, then its revocation,
    /// each read twice (the first fills the cache, the second is answered from it), 10,000 writes over 50 users.
    @Test @Loop func theWritingInstanceNeverReadsStale() async throws {
        try await AdminHarness.run { service in
            let cache = try Self.cache(service)
            #expect(await eventually(timeout: 10) { cache.isServing })
            // Users taken in turn, so that no user's grants pile up into thousands (each read evaluates them all).
            let users = (0..<50).map { "alternating-\($0)-" + randomToken() }
            let hits = cache.hits
            var stale = 0
            for round in 0..<(Self.alternations / 2) {
                let user = users[round % users.count]
                let id = try await Self.grant(service, user)
                for _ in 0..<2 where try await !Self.isActive(service, user) { stale += 1 }
                let revoked = try await service.call("DELETE", "/v1/admin/grants/\(id)")
                #expect(revoked.status == 200, "\(revoked)")
                for _ in 0..<2 where try await Self.isActive(service, user) { stale += 1 }
            }
            #expect(stale == 0)
            #expect(cache.hits - hits == Self.alternations, "the second read of each pair was a hit")
        }
    }

    /// A write waits for its change to reach this instance's cache before it answers; a refused one (4xx)
    /// changed nothing and answers at once.
    @Test @Loop func onlyWritesThatWereNotRefusedWaitForTheBarrier() async throws {
        try await AdminHarness.run { service in
            let cache = try Self.cache(service)
            #expect(await eventually(timeout: 10) { cache.isServing })
            let user = "barrier-" + randomToken()
            let before = cache.barriers
            let refused = try await service.call("POST", "/v1/admin/users/\(user)/grants", body: AdminHarness.json(["entitlement": "premium"]))
            #expect(refused.status == 400, "\(refused)")
            #expect(cache.barriers == before)
            _ = try await Self.grant(service, user)
            #expect(cache.barriers == before + 1)
        }
    }

    /// While the listener is down the cache serves nothing (every read goes to the database); once it
    /// listens again, answers are kept and served again.
    @Test @Loop func aLostListenerStopsTheCacheUntilItIsBack() async throws {
        try await AdminHarness.run { service in
            let cache = try Self.cache(service)
            let listener = try #require(service.application).listener
            #expect(await eventually(timeout: 10) { cache.isServing })
            let user = "listener-" + randomToken()
            _ = try await Self.grant(service, user)
            #expect(try await Self.isActive(service, user))
            let filled = cache.hits
            #expect(try await Self.isActive(service, user))
            #expect(cache.hits == filled + 1)

            // Keep the listener from reconnecting, then cut its connection.
            let name = try #require(service.databaseURL.split(separator: "/").last.map(String.init))
            let server = try await PostgresConnection.connect(try TestDatabase.url())
            defer { server.close() }
            _ = try await server.query("ALTER DATABASE \(name) ALLOW_CONNECTIONS false")
            _ = try await server.query("SELECT pg_terminate_backend($1::int)", Int(try #require(listener.backendPID)))
            #expect(await eventually(timeout: 10) { !cache.isServing })
            let (hits, misses) = (cache.hits, cache.misses)
            for _ in 0..<5 { #expect(try await Self.isActive(service, user)) }
            #expect(cache.hits == hits && cache.misses == misses + 5 && cache.count == 0)

            _ = try await server.query("ALTER DATABASE \(name) ALLOW_CONNECTIONS true")
            #expect(await eventually(timeout: 15) { cache.isServing })
            #expect(try await Self.isActive(service, user))
            #expect(try await Self.isActive(service, user))
            #expect(cache.hits == hits + 1)
        }
    }

    /// A read with `at` never comes from the cache, even for a user whose present answer is held.
    @Test @Loop func readsAtAnInstantBypassTheCache() async throws {
        try await AdminHarness.run { service in
            let (cache, user) = try await Self.heldUser(service, "at-")
            #expect(try await Self.isActive(service, user))
            let (hits, misses) = (cache.hits, cache.misses)
            #expect(try await !Self.isActive(service, user, at: Date().addingTimeInterval(-3_600)))
            #expect(try await Self.isActive(service, user, at: Date().addingTimeInterval(60)))
            #expect(cache.hits == hits && cache.misses == misses)
        }
    }

    /// An answer held until an entitlement ends by time alone is not served past that end, and `as_of` is
    /// the time of each answer, not of the fill.
    @Test @Loop func anExpiryByTimeAloneIsNotServedStale() async throws {
        try await AdminHarness.run { service in
            let cache = try Self.cache(service)
            #expect(await eventually(timeout: 10) { cache.isServing })
            let user = "expiry-" + randomToken()
            let end = Date(timeIntervalSince1970: (Date().timeIntervalSince1970 + 2).rounded(.down))
            _ = try await Self.grant(service, user, ["expires_at": RFC3339.string(from: end)])
            #expect(try await Self.isActive(service, user))
            let first = try await service.call("GET", "/v1/users/\(user)/entitlements", key: .app)
            let hits = cache.hits
            await LoopTimer.sleep(milliseconds: UInt64(max(0, end.timeIntervalSinceNow * 1_000)) + 1_000)
            let second = try await service.call("GET", "/v1/users/\(user)/entitlements", key: .app)
            #expect(cache.hits == hits, "the held answer expired at its validUntil")
            #expect((second.object["entitlements"] as? [String: Any])?["premium"].flatMap { ($0 as? [String: Any])?["active"] as? Bool } == false)
            let asOf = [first, second].compactMap { ($0.object["as_of"] as? String).flatMap(RFC3339.date(from:)) }
            #expect(asOf.count == 2 && asOf[1] > asOf[0])
        }
    }

    /// A hit in a later second than the fill's is still a hit, and its `as_of` is the time of that answer.
    @Test @Loop func aHitAnswersItsOwnTime() async throws {
        try await AdminHarness.run { service in
            let (cache, user) = try await Self.heldUser(service, "stamp-")
            var stamps: [Date] = []
            for _ in 0..<2 {
                let hits = cache.hits
                let answer = try await service.call("GET", "/v1/users/\(user)/entitlements", key: .app)
                #expect(cache.hits == hits + 1)
                if let stamp = (answer.object["as_of"] as? String).flatMap(RFC3339.date(from:)) { stamps.append(stamp) }
                // Into the next whole second: the held body's stamp is then out of date.
                let now = Date().timeIntervalSince1970
                await LoopTimer.sleep(milliseconds: UInt64(((now.rounded(.down) + 1 - now) * 1_000).rounded(.up)) + 20)
            }
            #expect(stamps.count == 2 && stamps[1] > stamps[0])
            #expect(stamps.last.map { abs($0.timeIntervalSinceNow) < 2 } == true)
        }
    }

    /// A held answer is served with the time of the answer: as it is within the second of its stamp, restamped
    /// in place in a later one (the earlier body handed out keeps its own time).
    @Test @Loop func heldAnswersCarryTheTimeOfTheAnswer() throws {
        let fill = Date(timeIntervalSince1970: 1_800_000_000)
        let document = EntitlementsDocument(
            userID: "u", report: EntitlementReport(asOf: fill, entitlements: [:]), consumables: ["coins": 3])
        let body = HTTPResponse.json(document).body
        #expect(EntitlementsAnswer(body: body, asOf: fill.addingTimeInterval(90)) == nil, "the stamp must be the body's")
        #expect(EntitlementsAnswer(body: Array(#"{"consumables":{}}"#.utf8), asOf: fill) == nil)
        var answer = try #require(EntitlementsAnswer(body: body, asOf: fill))
        #expect(answer.body(stamp: AsOfStamp(fill.addingTimeInterval(0.999))) == body, "the same second")
        var served: [(body: [UInt8], expected: [UInt8])] = []
        for seconds: TimeInterval in [90.5, 90, 86_400 * 400, 30] {
            let at = fill.addingTimeInterval(seconds)
            var moved = document
            moved.asOf = at
            served.append((answer.body(stamp: AsOfStamp(at)), HTTPResponse.json(moved).body))
        }
        #expect(served.allSatisfy { $0.body == $0.expected }, "bodies handed out earlier keep their own time")
        #expect(body == HTTPResponse.json(document).body)
    }
}
