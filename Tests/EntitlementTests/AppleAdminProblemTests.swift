import EntitlementModel
import Foundation
import Testing
@testable import EntitlementService
@testable import ServiceRuntime

/// The problems of `POST /v1/admin/users/{user_id}/apple-orders` and `/refresh` when Apple fails them, through
/// the fake App Store's scripted Server API: `apple_status` where Apple answered an error, none where it never
/// answered.
@Suite(.serialized) struct AppleAdminProblemTests {
    static let admin = ServiceHarness.adminKey
    static let order = #"{"order_id": "MPROBLEM01"}"#

    @Test @Loop func refusalsAre502WithAppleStatus() async throws {
        try await ServiceHarness.run(serverAPI: true) { service in
            // A bare 404 from Production is the request's refusal, not the key's; Sandbox is not asked.
            try await Self.script(service, "order_lookup", "Production", [["status": 404]])
            let bare = try await Self.problem(service, "apple-orders", status: 502)
            #expect(bare["apple_status"] as? Int == 404)
            #expect(bare["detail"] as? String == "The App Store refused the request (HTTP 404); nothing was changed.")
            #expect(try await Self.requests(service)["order_lookup.Sandbox"] == nil)

            // A 401 from both environments: the key.
            try await Self.script(service, "order_lookup", nil, [["status": 401], ["status": 401]])
            let key = try await Self.problem(service, "apple-orders", status: 502)
            #expect(key["apple_status"] as? Int == 401)
            #expect(key["detail"] as? String == "The App Store refused the service's API key; nothing was changed.")

            // A rejection with an errorCode shows the errorCode.
            try await Self.script(service, "order_lookup", "Production", [["error_code": 4_000_005]])
            #expect(try await Self.problem(service, "apple-orders", status: 502)["apple_status"] as? Int == 4_000_005)
        }
    }

    @Test @Loop func unavailabilityIs503WithAppleStatusOnlyWhereAppleAnswered() async throws {
        try await ServiceHarness.run(serverAPI: true) { service in
            // 5000001 on every retry within the wait.
            try await Self.script(service, "order_lookup", "Production", Array(repeating: ["error_code": 5_000_001], count: 20))
            #expect(try await Self.problem(service, "apple-orders?wait_ms=300", status: 503)["apple_status"] as? Int == 5_000_001)

            // A timeout: the request went out, Apple never answered.
            try await Self.script(service, "order_lookup", "Production", [["delay_ms": 2_000]])
            let sent = try await Self.requests(service)["order_lookup.Production"] ?? 0
            let timedOut = try await Self.problem(service, "apple-orders?wait_ms=300", status: 503)
            #expect(timedOut["apple_status"] == nil && timedOut["status"] as? Int == 503)
            #expect(try await Self.requests(service)["order_lookup.Production"] == sent + 1)

            // A refresh whose history answers a bare 500 on every retry shows the HTTP status.
            let bought = try await service.fakeBuy(["product_id": "com.example.lifetime", "type": "non_consumable", "customer": "dave",
                                                    "environment": "Production"])
            let order = try #require(bought["order_id"] as? String)
            let attached = try await service.request("POST", "/v1/admin/users/u1/apple-orders", json: "{\"order_id\": \"\(order)\"}", key: Self.admin)
            #expect(attached.status == 200, "\(attached.text)")
            try await Self.script(service, "transaction_history", "Production", Array(repeating: ["status": 500], count: 20))
            #expect(try await Self.problem(service, "refresh?wait_ms=300", status: 503)["apple_status"] as? Int == 500)

            // Apple's 429 beyond the wait shows 4290000; the next call, held by it before asking, shows nothing.
            try await Self.script(service, "order_lookup", "Production", [["status": 429, "retry_after_ms": 5_000]])
            #expect(try await Self.problem(service, "apple-orders?wait_ms=300", status: 503)["apple_status"] as? Int == 4_290_000)
            let asked = try await Self.requests(service)
            let held = try await Self.problem(service, "refresh?wait_ms=300", status: 503)
            #expect(held["apple_status"] == nil)
            #expect(try await Self.requests(service) == asked)
        }
    }

    /// Programs the fake's next Server API answers of `endpoint` (in `environment`, or either when nil).
    @Loop private static func script(_ service: ServiceHarness, _ endpoint: String, _ environment: String?, _ steps: [JSONValue]) async throws {
        var body: [String: JSONValue] = ["endpoint": .string(endpoint), "steps": .array(steps)]
        body["environment"] = environment.map(JSONValue.string)
        #expect(try await service.fakeCall("POST", "/control/server-api/scenarios", .object(body)).status == 201)
    }

    /// `POST /v1/admin/users/u1/<route>` as an admin, expected to answer the problem `status`; its body.
    @Loop private static func problem(_ service: ServiceHarness, _ route: String, status: Int) async throws -> [String: Any] {
        let answer = try await service.request("POST", "/v1/admin/users/u1/\(route)", json: route.hasPrefix("apple-orders") ? order : nil, key: admin)
        #expect(answer.status == status, "\(answer.text)")
        #expect(answer.headers["Content-Type"] == "application/problem+json")
        return try answer.json()
    }

    /// The Server API requests the fake received, by `<endpoint>.<environment>`.
    @Loop private static func requests(_ service: ServiceHarness) async throws -> [String: Int] {
        try await service.fakeCall("GET", "/control/server-api/requests").json()["counts"] as? [String: Int] ?? [:]
    }
}
