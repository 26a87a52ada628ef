import Foundation
@testable import ServiceRuntime

/// `scripts/webhook-receiver/receiver.py` run as a child process: a receiver written with the Standard Webhooks
/// reference library (the `standardwebhooks` package from PyPI), not with this project's code, which verifies
/// every request it gets and keeps the verified events. `scripts/test.sh` makes its Python environment and
/// exports the interpreter as `WEBHOOK_RECEIVER_PYTHON`; a test that needs it fails without it.
final class WebhookReceiver: @unchecked Sendable {
    /// A fresh secret for one test: `whsec_` and the base64 of 32 random bytes.
    static func makeSecret() -> String {
        "whsec_" + Data((0..<32).map { _ in UInt8.random(in: 0...255) }).base64EncodedString()
    }

    /// One verified event as the receiver kept it.
    struct Received: @unchecked Sendable {
        var id: String
        var body: [String: Any]
        /// Which attempt of this event (as the receiver counted verified requests for its id) was kept.
        var attempt: Int
        var receivedAt: Double
        var type: String { body["type"] as? String ?? "" }
        var userID: String { body["user_id"] as? String ?? "" }
        var sequence: Int { body["sequence"] as? Int ?? 0 }
    }

    /// What the receiver has seen so far.
    struct Tally: Sendable {
        var events: [Received]
        var invalid: Int
        var refused: Int
        var requests: Int
    }

    let secret: String
    let port: Int
    private let process = Process()

    /// Starts the receiver on a free port; `failRate` is the share of verified requests it answers 500.
    init(secret: String = WebhookReceiver.makeSecret(), failRate: Double = 0, seed: Int = 1) throws {
        self.secret = secret
        let python = try TestDatabase.environment("WEBHOOK_RECEIVER_PYTHON")
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("scripts/webhook-receiver/receiver.py")
        process.executableURL = URL(fileURLWithPath: python)
        process.arguments = [script.path, "--secret", secret, "--port", "0", "--fail-rate", String(failRate), "--seed", String(seed)]
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        // The first line, `listening <port>`, comes once the socket accepts connections.
        var line = Data()
        let handle = output.fileHandleForReading
        while !line.contains(UInt8(ascii: "\n")) {
            let chunk = handle.availableData
            guard !chunk.isEmpty else { throw TestSetupError("the webhook receiver exited before listening") }
            line += chunk
        }
        guard let text = String(data: line, encoding: .utf8), text.hasPrefix("listening "),
              let port = Int(text.dropFirst("listening ".count).prefix { $0.isNumber }) else {
            throw TestSetupError("the webhook receiver said \(String(decoding: line, as: UTF8.self))")
        }
        self.port = port
    }

    deinit {
        // SIGKILL: a child of the test process inherits its blocked SIGTERM.
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
    }

    var url: String { "http://127.0.0.1:\(port)/hook" }

    /// The environment that points a service at this receiver.
    var environment: [String: String] { ["WEBHOOK_URL": url, "WEBHOOK_SECRET": secret] }

    /// What it has received.
    func tally() async throws -> Tally {
        let response = try await RawHTTPClient.exchange(port: port, RawHTTPClient.request("GET", "/received"), timeout: 10)
        let document = try response.json()
        let events = (document["events"] as? [[String: Any]] ?? []).map { entry in
            let headers = entry["headers"] as? [String: String] ?? [:]
            return Received(id: headers["webhook-id"] ?? "", body: entry["body"] as? [String: Any] ?? [:],
                            attempt: entry["attempt"] as? Int ?? 0, receivedAt: entry["received_at"] as? Double ?? 0)
        }
        return Tally(events: events, invalid: document["invalid"] as? Int ?? 0, refused: document["refused"] as? Int ?? 0,
                     requests: document["requests"] as? Int ?? 0)
    }

    /// Changes the share of requests it refuses.
    func setFailRate(_ rate: Double) async throws {
        _ = try await RawHTTPClient.exchange(port: port, RawHTTPClient.request("POST", "/control", body: #"{"fail_rate": \#(rate)}"#))
    }

    /// Answers every event kept with 200 and a body of `bytes` bytes (0: 204, no body).
    func setReplyBytes(_ bytes: Int) async throws {
        _ = try await RawHTTPClient.exchange(port: port, RawHTTPClient.request("POST", "/control", body: #"{"reply_bytes": \#(bytes)}"#))
    }
}
