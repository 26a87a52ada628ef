import Crypto
import EntitlementModel
import Foundation
import Testing
@testable import AppStore
@testable import FakeAppStore
@testable import ServiceRuntime

/// The fake App Store Server API on its own, over raw HTTP: Apple's token checks, the environments and
/// customers its store keeps apart, notification history's checks and pages, and its control API.
@Suite(.timeLimit(.minutes(1))) struct FakeServerAPITests {
    /// One request with `Authorization: Bearer <token>` (none when nil); the status, headers and body.
    @Loop static func api(_ fake: FakeAppStoreHarness, _ method: String, _ path: String, token: String?,
                          body: String? = nil) async throws -> RawHTTPClient.Response {
        let port = fake.port
        var headers: [(String, String)] = token.map { [("Authorization", "Bearer " + $0)] } ?? []
        if body != nil { headers.append(("Content-Type", "application/json")) }
        let request = RawHTTPClient.request(method, path, headers: headers, body: body)
        return try await offLoop {
            let connection = try RawHTTPClient(port: port)
            try connection.send(request)
            return try connection.readResponse()
        }
    }

    /// `token` signed with `key`, as a client would send it.
    static func mint(_ token: ServerAPIToken, key: P256.Signing.PrivateKey) throws -> String {
        let signature = try key.signature(for: Data(token.signingInput.utf8))
        return token.signingInput + "." + CompactJWS.base64URL(signature.rawRepresentation)
    }

    @Test @Loop func tokensAreCheckedAsAppleChecksThem() async throws {
        try await FakeAppStoreHarness.run { fake in
            let key = fake.fake.serverAPIKey, config = fake.fake.configuration
            let now = Date()
            func token(_ change: (inout ServerAPIToken) -> Void = { _ in }) -> ServerAPIToken {
                var token = ServerAPIToken(keyID: config.apiKeyID, issuerID: config.apiIssuerID, bundleID: config.bundleID, now: now, lifetime: 300)
                change(&token)
                return token
            }
            let cases: [(String, String?, String?)] = [
                ("the client's", fake.credentials().token(), nil),
                ("Apple's library's, without iat", try Self.mint(token { $0.issuedAt = nil }, key: key), nil),
                ("none", nil, "no Authorization"),
                ("garbage", "not-a-token", "malformed JWS"),
                ("another key's", try Self.mint(token(), key: P256.Signing.PrivateKey()), "signature"),
                ("expired", try Self.mint(token { $0.expiresAt = now.addingTimeInterval(-120) }, key: key), "expired"),
                ("two hours long", try Self.mint(token { $0.expiresAt = now.addingTimeInterval(7_200) }, key: key), "60 minutes"),
                ("another audience", try Self.mint(token { $0.audience = "appstoreconnect-v2" }, key: key), "aud"),
                ("another app's", try Self.mint(token { $0.bundleID = "com.example.other" }, key: key), "bid"),
                ("another key id's", try Self.mint(token { $0.keyID = "OTHERKEY01" }, key: key), "kid"),
                ("another issuer's", try Self.mint(token { $0.issuerID = "someone-else" }, key: key), "iss"),
            ]
            for (name, bearer, refusal) in cases {
                let response = try await Self.api(fake, "GET", "/inApps/v1/transactions/1", token: bearer)
                if refusal == nil {
                    #expect(response.status == 404 && response.text.contains("4040010"), "\(name): \(response.status) \(response.text)")
                } else {
                    #expect(response.status == 401 && response.text == "Unauthenticated\n", "\(name): \(response.status)")
                }
            }
            let refusals = try await fake.serverAPIRequests().map { $0[member: "refusal"]?.text }
            for ((name, _, expected), refusal) in zip(cases, refusals) {
                #expect(expected.map { refusal?.contains($0) == true } ?? (refusal == nil), "\(name): \(refusal ?? "accepted")")
            }
        }
    }

    @Test @Loop func eachEnvironmentAndCustomerKeepsItsPurchases() async throws {
        try await FakeAppStoreHarness.run { fake in
            let token = fake.credentials().token()
            let alice = try await fake.buy(["product_id": "com.example.coins", "type": "consumable", "customer": "alice"])
            let bob = try await fake.buy(["product_id": "com.example.coins", "type": "consumable", "customer": "bob"])
            let aliceID = try #require(alice[member: "transaction_id"]?.text), bobID = try #require(bob[member: "transaction_id"]?.text)
            let order = try #require(alice[member: "order_id"]?.text)
            #expect(order.hasPrefix("M") && alice[member: "customer"] == "alice")

            #expect(try await Self.api(fake, "GET", "/sandbox/inApps/v1/transactions/\(aliceID)", token: token).status == 200)
            let production = try await Self.api(fake, "GET", "/inApps/v1/transactions/\(aliceID)", token: token)
            #expect(production.status == 404 && production.text.contains("4040010"))
            #expect(try await Self.api(fake, "GET", "/inApps/v1/lookup/\(order)", token: token).text == #"{"status":1}"#)
            let history = try await Self.api(fake, "GET", "/sandbox/inApps/v2/history/\(bobID)", token: token).json()
            let signed = try #require(history["signedTransactions"] as? [String])
            #expect(try signed.map { try SignedJWSCheck.payload($0)[member: "transactionId"]?.text } == [bobID])
            #expect(history["hasMore"] as? Bool == false && history["environment"] as? String == "Sandbox")
            let invalid = try await Self.api(fake, "GET", "/sandbox/inApps/v1/transactions/abc", token: token)
            #expect(invalid.status == 400 && invalid.text.contains("4000006"))
            let revision = try await Self.api(fake, "GET", "/sandbox/inApps/v2/history/\(bobID)?revision=nonsense", token: token)
            #expect(revision.status == 400 && revision.text.contains("4000005"))

            // An order is one customer's, in one environment.
            let (status, _, text) = try await fake.call("POST", "/control/storekit/purchases", [
                "product_id": "x", "type": "consumable", "customer": "bob", "order_id": .string(order),
            ])
            #expect(status == 409 && text.contains("order_id"))
            #expect(try await fake.call("POST", "/control/storekit/purchases", ["product_id": "x", "type": "consumable", "order_id": "bad id"]).status == 400)
        }
    }

    @Test @Loop func notificationHistoryChecksTheRequestAndPages() async throws {
        try await FakeAppStoreHarness.run { fake in
            let token = fake.credentials().token()
            let bought = try await fake.buy(["product_id": "com.example.monthly", "type": "auto_renewable"])
            let id = try #require(bought[member: "transaction_id"]?.text)
            // 22 delivered, one refused by the receiver, one tampered (never in Apple's history).
            try await ScriptedHTTPServer.run(Array(repeating: .ok(), count: 23) + [.respond(status: 500)]) { server in
                let orders: [JSONValue] = (0..<22).map { _ in ["notification_type": "DID_RENEW", "transaction_id": .string(id)] }
                    + [["notification_type": "TEST", "tamper": true]]
                let (status, _, text) = try await fake.call("POST", "/control/storekit/notifications/batch", [
                    "url": .string(server.baseURL + "/apple"), "notifications": .array(orders), "shuffle": false, "concurrency": 1,
                ])
                #expect(status == 200, "\(text)")
                _ = try await fake.call("POST", "/control/storekit/notifications", [
                    "url": .string(server.baseURL + "/apple"), "notification_type": "REFUND", "transaction_id": .string(id),
                ])
            }
            let now = Int(Date().timeIntervalSince1970 * 1_000)
            func history(_ body: String, page: String? = nil) async throws -> RawHTTPClient.Response {
                try await Self.api(fake, "POST", "/sandbox/inApps/v1/notifications/history" + (page.map { "?paginationToken=" + $0 } ?? ""),
                                   token: token, body: body)
            }
            let span = #"{"startDate":\#(now - 3_600_000),"endDate":\#(now + 60_000)"#
            let first = try await history(span + "}").json()
            let items = try #require(first["notificationHistory"] as? [[String: Any]])
            #expect(items.count == 20 && first["hasMore"] as? Bool == true)
            let next = try #require(first["paginationToken"] as? String)
            let second = try await history(span + "}", page: next).json()
            let rest = try #require(second["notificationHistory"] as? [[String: Any]])
            #expect(rest.count == 3 && second["hasMore"] as? Bool == false && second["paginationToken"] == nil)
            let types = try (items + rest).map { try SignedJWSCheck.payload(#require($0["signedPayload"] as? String))[member: "notificationType"]?.text }
            #expect(types == Array(repeating: "DID_RENEW", count: 22) + ["REFUND"])
            let failures = try await history(span + #","onlyFailures":true}"#).json()["notificationHistory"] as? [[String: Any]]
            let attempts = failures?.first?["sendAttempts"] as? [[String: Any]]
            #expect(failures?.count == 1 && attempts?.first?["sendAttemptResult"] as? String == "UNSUCCESSFUL_HTTP_RESPONSE_CODE")
            let refunds = try await history(span + #","notificationType":"REFUND","transactionId":"\#(id)"}"#).json()["notificationHistory"] as? [Any]
            #expect(refunds?.count == 1)
            let production = try await Self.api(fake, "POST", "/inApps/v1/notifications/history", token: token, body: span + "}").json()
            #expect((production["notificationHistory"] as? [Any])?.isEmpty == true)

            for (body, code) in [
                (#"{"endDate":\#(now)}"#, 4_000_015), (#"{"startDate":\#(now)}"#, 4_000_016),
                (#"{"startDate":\#(now),"endDate":\#(now)}"#, 4_000_013),
                (#"{"startDate":\#(now - 181 * 86_400_000),"endDate":\#(now)}"#, 4_000_012),
            ] {
                let response = try await history(body)
                #expect(response.status == 400 && response.text.contains(String(code)), "\(body): \(response.text)")
            }
            #expect(try await history(span + "}", page: "elsewhere").text.contains("4000014"))
        }
    }

    @Test @Loop func outagesFaultsAndItsOwnRateLimit() async throws {
        try await FakeAppStoreHarness.run { fake in
            let token = fake.credentials().token()
            try await fake.configureServerAPI(["outage": true])
            let outage = try await Self.api(fake, "GET", "/inApps/v1/transactions/1", token: token)
            #expect(outage.status == 503 && !outage.text.contains("errorCode"))
            try await fake.configureServerAPI(["outage": false, "fault_rate": 1, "fault_error_code": 4_040_002])
            let fault = try await Self.api(fake, "GET", "/inApps/v1/transactions/1", token: token)
            #expect(fault.status == 404 && fault.text.contains("4040002"))
            // Half of the requests, replayably: the same seed draws the same faults.
            func draws() async throws -> [Int] {
                try await fake.configureServerAPI(["fault_rate": 0.5, "fault_error_code": 5_000_001, "fault_seed": 7])
                var statuses: [Int] = []
                for _ in 0..<20 { statuses.append(try await Self.api(fake, "GET", "/inApps/v1/transactions/1", token: token).status) }
                return statuses
            }
            let drawn = try await draws()
            #expect(try await draws() == drawn && drawn.contains(500) && drawn.contains(404))
            // Five requests in at most two seconds' windows of two: at least one is refused, Apple's way.
            try await fake.configureServerAPI(["fault_rate": 0, "rate_limit_per_second": 2])
            var limited: [RawHTTPClient.Response] = []
            for _ in 0..<5 {
                let response = try await Self.api(fake, "GET", "/inApps/v1/transactions/1", token: token)
                if response.status == 429 { limited.append(response) }
            }
            let first = try #require(limited.first)
            #expect(first.text.contains("4290000"))
            let retryAfter = try #require(first.headers["Retry-After"].flatMap { Double($0) })
            #expect(retryAfter > Date().timeIntervalSince1970 * 1_000 - 1_000 && retryAfter <= Date().timeIntervalSince1970 * 1_000 + 1_000)
            let config = try #require(try await fake.call("GET", "/control/server-api/config").body)
            #expect(config[member: "rate_limit_per_second"] == 2)
            try await fake.configureServerAPI(["rate_limit_per_second": nil])
            #expect(try await fake.call("GET", "/control/server-api/config").body?[member: "rate_limit_per_second"] == .null)
            // A reset brings the start settings back.
            _ = try await fake.call("POST", "/control/reset")
            let reset = try await fake.call("GET", "/control/server-api/config").body
            #expect([JSONValue.int(0), .double(0)].contains(reset?[member: "fault_rate"]) && reset?[member: "rate_limit_per_second"] == .null)
            #expect(try await fake.serverAPIRequests().isEmpty)
        }
    }

    @Test @Loop func theControlAPIRefusesWhatItCannotDo() async throws {
        try await FakeAppStoreHarness.run { fake in
            for (path, body, field) in [
                ("/control/server-api/config", ["fault_rate": 1.5] as JSONValue, "fault_rate"),
                ("/control/server-api/config", ["speed": 1], "speed"),
                ("/control/server-api/scenarios", ["endpoint": "refunds", "steps": [[:]]], "endpoint"),
                ("/control/server-api/scenarios", ["steps": []], "steps"),
                ("/control/server-api/scenarios", ["steps": [["status": 99]]], "steps[0].status"),
            ] {
                let (status, answer, text) = try await fake.call(path.hasSuffix("config") ? "PUT" : "POST", path, body)
                #expect(status == 400 && answer?[member: "field"]?.text == field, "\(body): \(text)")
            }
            let served = try #require(try await fake.call("GET", "/control/server-api").body)
            let pem = try #require(served[member: "private_key"]?.text)
            #expect(try P256.Signing.PrivateKey(pemRepresentation: pem).rawRepresentation == fake.fake.serverAPIKey.rawRepresentation)
            #expect(served[member: "key_id"]?.text == "FAKEKEY001" && served[member: "sandbox_path"]?.text == "/sandbox")
        }
    }

    @Test func theKeyFileIsCreatedOnceAndReadAfter() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("fake-api-key-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("key.p8").path
        let made = try FakeServerAPIKey.loadOrCreate(path: path)
        #expect(try FakeServerAPIKey.loadOrCreate(path: path).rawRepresentation == made.rawRepresentation)
        #expect((try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int) == 0o600)
        // The service reads the same file as its .p8.
        #expect(try ServerAPICredentials.privateKey(pemFile: path).rawRepresentation == made.rawRepresentation)
        try Data("not a key".utf8).write(to: URL(fileURLWithPath: path))
        let error = #expect(throws: ConfigurationError.self) { try FakeServerAPIKey.loadOrCreate(path: path) }
        #expect(error?.variable == "FAKE_APPLE_API_KEY_FILE" && error?.description.contains(path) == true)
        let configuration = try FakeAppStoreConfiguration(environment: [
            "FAKE_APPLE_API_KEY_FILE": path, "FAKE_APPLE_API_KEY_ID": "KEY2", "FAKE_APPLE_ISSUER_ID": "issuer-2",
        ])
        #expect(configuration.apiKeyFile == path && configuration.apiKeyID == "KEY2" && configuration.apiIssuerID == "issuer-2")
    }
}
