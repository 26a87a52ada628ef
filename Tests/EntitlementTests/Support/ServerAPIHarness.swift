import Crypto
import EntitlementModel
import Foundation
import X509
@testable import AppStore
@testable import FakeAppStore
@testable import ServiceRuntime

/// The project's signed-data verifier trusting `roots`, for the fake App Store's app (its default bundle and app
/// Apple id), as the Server API client checks signed fields with it.
func serverAPIVerifier(roots: [Certificate], bundleID: String = "com.example.app") -> some ServerAPISignatureChecking {
    SignedDataVerifier(roots: roots, bundleID: bundleID, appAppleID: 1_234_567_890)
}

/// The fake App Store's Server API at hand: clients aimed at it, purchases, scenarios, and what it received.
extension FakeAppStoreHarness {
    /// The fake's key, key id, issuer and bundle id as the service's credentials (another key when given).
    func credentials(key: P256.Signing.PrivateKey? = nil) -> ServerAPICredentials {
        ServerAPICredentials(issuerID: fake.configuration.apiIssuerID, keyID: fake.configuration.apiKeyID,
                             bundleID: fake.configuration.bundleID, privateKey: key ?? fake.serverAPIKey)
    }

    /// A Server API client aimed at this fake (Production at the root, Sandbox under `/sandbox`), verifying
    /// with the fake's root unless `root` says otherwise; quick retries so that tests stay short.
    func serverAPIClient(key: P256.Signing.PrivateKey? = nil, root: Certificate? = nil, timeoutMs: Int = 5_000,
                         retry: RetrySchedule = RetrySchedule(baseMs: 20, maxMs: 80)) -> ServerAPIClient {
        ServerAPIClient(
            http: HTTPClient(configuration: HTTPClientConfiguration(connectTimeoutMs: 2_000, totalTimeoutMs: timeoutMs)),
            settings: ServerAPISettings(credentials: credentials(key: key), productionURL: baseURL, sandboxURL: baseURL + "/sandbox/",
                                        timeoutMs: timeoutMs, defaultWaitMs: 10_000, retry: retry),
            verifier: serverAPIVerifier(roots: [root ?? fake.signingChain.root]))
    }

    /// Buys through `POST /control/storekit/purchases`; returns the answer.
    func buy(_ body: JSONValue) async throws -> JSONValue {
        let (status, answer, text) = try await call("POST", "/control/storekit/purchases", body)
        guard status == 201, let answer else { throw HarnessFailure(message: "purchase refused with \(status): \(text)") }
        return answer
    }

    /// A lifecycle change through `POST /control/storekit/purchases/{original}/{action}`.
    func change(_ original: String, _ action: String, _ body: JSONValue = [:]) async throws -> JSONValue {
        let (status, answer, text) = try await call("POST", "/control/storekit/purchases/\(original)/\(action)", body)
        guard status == 200, let answer else { throw HarnessFailure(message: "\(action) refused with \(status): \(text)") }
        return answer
    }

    /// Programs Server API answers (`POST /control/server-api/scenarios`).
    func serverAPIScenario(_ endpoint: ServerAPIEndpoint?, _ environment: StoreEnvironment?, _ steps: [JSONValue]) async throws {
        var body: [String: JSONValue] = ["steps": .array(steps)]
        body["endpoint"] = endpoint.map { .string($0.rawValue) }
        body["environment"] = environment.map { .string($0.rawValue) }
        let (status, _, text) = try await call("POST", "/control/server-api/scenarios", .object(body))
        guard status == 201 else { throw HarnessFailure(message: "scenario refused with \(status): \(text)") }
    }

    /// Changes the Server API's settings (`PUT /control/server-api/config`).
    func configureServerAPI(_ settings: JSONValue) async throws {
        let (status, _, text) = try await call("PUT", "/control/server-api/config", settings)
        guard status == 200 else { throw HarnessFailure(message: "server-api config refused with \(status): \(text)") }
    }

    /// The requests the Server API received, oldest first, as `GET /control/server-api/requests` lists them.
    func serverAPIRequests() async throws -> [JSONValue] {
        guard case .array(let requests)? = try await call("GET", "/control/server-api/requests").body?[member: "requests"] else {
            throw HarnessFailure(message: "no requests list")
        }
        return requests
    }

    /// `<environment> <endpoint> <status>` of each request the Server API received, oldest first.
    func serverAPITrail() async throws -> [String] {
        try await serverAPIRequests().map { request in
            let status = request[member: "status"].flatMap { if case .int(let status) = $0 { String(status) } else { nil } } ?? "-"
            return "\(request[member: "environment"]?.text ?? "?") \(request[member: "endpoint"]?.text ?? "?") \(status)"
        }
    }
}
