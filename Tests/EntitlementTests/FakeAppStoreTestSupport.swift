import EntitlementModel
import Foundation
@testable import AppStore
@testable import EntitlementService
@testable import FakeAppStore
@testable import ServiceRuntime

/// A fake App Store started in-process on an ephemeral loopback port, with its control API at hand.
///
/// Control calls go through `RawHTTPClient` (plain sockets, off the loop), so they do not depend on the
/// libcurl client that the App Store tests exercise.
@Loop
final class FakeAppStoreHarness {
    let fake: FakeAppStore
    let port: Int

    private init(fake: FakeAppStore, port: Int) {
        self.fake = fake
        self.port = port
    }

    /// Starts a fake with `configuration` on 127.0.0.1 and a port the kernel picks.
    static func start(_ configuration: FakeAppStoreConfiguration = FakeAppStoreConfiguration()) throws -> FakeAppStoreHarness {
        let fake = FakeAppStore(configuration: configuration)
        return FakeAppStoreHarness(fake: fake, port: try fake.start(port: 0))
    }

    /// Runs `body` with a fresh fake, shutting it down however `body` ends.
    static func run<T>(
        _ configuration: FakeAppStoreConfiguration = FakeAppStoreConfiguration(),
        _ body: (FakeAppStoreHarness) async throws -> T
    ) async throws -> T {
        let harness = try start(configuration)
        do {
            let result = try await body(harness)
            await harness.fake.shutdown()
            return result
        } catch {
            await harness.fake.shutdown()
            throw error
        }
    }

    var baseURL: String { "http://127.0.0.1:\(port)" }
    var productionURL: String { baseURL + "/verifyReceipt" }
    var sandboxURL: String { baseURL + "/sandbox/verifyReceipt" }

    /// An App Store client aimed at this fake, on its own `HTTPClient`.
    func client(secret: String? = nil, bundleID: String? = nil, timeoutMs: Int = 5_000) -> AppStoreClient {
        AppStoreClient(
            http: HTTPClient(configuration: HTTPClientConfiguration(connectTimeoutMs: min(timeoutMs, 2_000), totalTimeoutMs: timeoutMs)),
            settings: AppStoreSettings(productionURL: productionURL, sandboxURL: sandboxURL, sharedSecret: secret, bundleID: bundleID))
    }

    /// One control (or raw verifyReceipt) request on a fresh connection; returns the status and the body.
    func call(_ method: String, _ path: String, _ json: JSONValue? = nil, rawBody: String? = nil) async throws -> (status: Int, body: JSONValue?, text: String) {
        let response = try await exchange(method, path, body: rawBody ?? json?.jsonText)
        return (response.status, try? JSONDecoder().decode(JSONValue.self, from: Data(response.body)), response.text)
    }

    /// One request on a fresh connection, answered as it came (status, headers, bytes).
    func exchange(_ method: String, _ path: String, body: String? = nil, timeout: Double = 5) async throws -> RawHTTPClient.Response {
        let port = port
        return try await offLoop {
            let connection = try RawHTTPClient(port: port)
            try connection.send(RawHTTPClient.request(
                method, path, headers: body == nil ? [] : [("Content-Type", "application/json")], body: body))
            return try connection.readResponse(timeout: timeout)
        }
    }

    /// Programs a scenario and checks the fake took it.
    func scenario(_ receiptData: String, production: [JSONValue] = [], sandbox: [JSONValue] = []) async throws {
        var scenario: [String: JSONValue] = ["receipt_data": .string(receiptData)]
        if !production.isEmpty { scenario["production"] = .array(production) }
        if !sandbox.isEmpty { scenario["sandbox"] = .array(sandbox) }
        let (status, _, text) = try await call("POST", "/control/scenarios", .object(scenario))
        guard status == 201 else { throw HarnessFailure(message: "scenario refused with \(status): \(text)") }
    }

    /// Changes the fake's settings through `PUT /control/config`.
    func configure(_ settings: JSONValue) async throws {
        let (status, _, text) = try await call("PUT", "/control/config", settings)
        guard status == 200 else { throw HarnessFailure(message: "config refused with \(status): \(text)") }
    }

    /// What the fake received, from `GET /control/requests`.
    func received() async throws -> ReceivedSummary {
        let (status, body, text) = try await call("GET", "/control/requests")
        guard status == 200, case .object(let fields)? = body else { throw HarnessFailure(message: "requests: \(status) \(text)") }
        func int(_ key: String) -> Int { if case .int(let value)? = fields[key] { value } else { -1 } }
        var passwords: [String] = []
        if case .array(let list)? = fields["passwords"] {
            for case .string(let password) in list { passwords.append(password) }
        }
        var environments: [String] = []
        if case .array(let list)? = fields["requests"] {
            for case .object(let request) in list {
                if case .string(let environment)? = request["environment"] { environments.append(environment) }
            }
        }
        return ReceivedSummary(count: int("count"), production: int("production"), sandbox: int("sandbox"),
                               passwords: passwords, environments: environments)
    }

    struct ReceivedSummary: Equatable {
        var count: Int
        var production: Int
        var sandbox: Int
        var passwords: [String]
        /// The endpoint of each request, oldest first (`Production`, `Sandbox`).
        var environments: [String]
    }

    struct HarnessFailure: Error, CustomStringConvertible {
        var message: String
        var description: String { message }
    }
}

/// Runs `body` with file descriptor 2 redirected into a temporary file, then returns what was written there
/// (every `Log` line of the process meanwhile) after copying it to the real standard error, where the test
/// runner's own output written meanwhile belongs. A file rather than a pipe, so a writer can never block.
@Loop
func capturingStandardError<T>(_ body: () async throws -> T) async throws -> (result: T, output: String) {
    let path = FileManager.default.temporaryDirectory.appendingPathComponent("stderr-\(UUID().uuidString).log").path
    let file = open(path, O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0o600)
    guard file >= 0 else { throw FakeAppStoreHarness.HarnessFailure(message: "cannot create \(path)") }
    Log.flush()  // lines logged before the capture stay out of it
    let saved = dup(2)
    dup2(file, 2)
    close(file)
    /// Puts fd 2 back and replays what it caught there, so no other test's output is lost.
    func restore() -> String {
        Log.flush()  // the loop buffers routine lines until its next turn: they belong to the capture
        dup2(saved, 2)
        close(saved)
        defer { unlink(path) }
        let output = (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
        FileHandle.standardError.write(Data(output.utf8))
        return output
    }
    do {
        let result = try await body()
        return (result, restore())
    } catch {
        _ = restore()
        throw error
    }
}

/// Decodes a fixture the way the client does, for comparisons.
func decodedFixture(_ name: String) throws -> AppStoreResponse {
    try AppStoreResponse(jsonData: Fixtures.data(name))
}
