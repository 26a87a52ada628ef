import EntitlementModel
import Foundation
import Testing
@testable import EntitlementService
@testable import ServiceRuntime

extension ServiceHarness {
    /// One request to the fake App Store's control API (or its Server API) over loopback.
    func fakeCall(_ method: String, _ path: String, _ json: JSONValue? = nil) async throws -> RawHTTPClient.Response {
        let base = try #require(setupEnvironment["APPLE_VERIFY_URL_PRODUCTION"].flatMap(URL.init(string:)))
        let port = try #require(base.port)
        let text = RawHTTPClient.request(method, path, headers: [("Content-Type", "application/json")], body: json?.jsonText ?? (method == "GET" ? nil : ""))
        return try await RawHTTPClient.exchange(port: port, text, timeout: 40)
    }

    /// Buys at the fake (`POST /control/storekit/purchases`); returns its answer.
    func fakeBuy(_ body: JSONValue) async throws -> [String: Any] {
        let response = try await fakeCall("POST", "/control/storekit/purchases", body)
        guard response.status == 201 else { throw RawHTTPClient.Failure.malformed("purchase answered \(response.status): \(response.text)") }
        return try response.json()
    }

    /// A lifecycle change at the fake (`POST /control/storekit/purchases/{original}/{action}`).
    func fakeChange(_ original: String, _ action: String, _ body: JSONValue = [:]) async throws {
        let response = try await fakeCall("POST", "/control/storekit/purchases/\(original)/\(action)", body)
        guard response.status == 200 else { throw RawHTTPClient.Failure.malformed("\(action) answered \(response.status): \(response.text)") }
    }
}
