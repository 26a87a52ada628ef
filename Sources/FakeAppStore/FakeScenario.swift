import ServiceRuntime
import EntitlementModel

/// One programmed answer of the fake App Store, parsed from a control-API step such as `{"status": 21007}`,
/// `{"fixture": "verifyreceipt_status0_….json"}`, `{"body": {...}}`, `{"http_status": 503}`,
/// `{"delay_ms": 2000}`, `{"action": "stall"}` or `{"action": "drop"}`.
struct FakeStep: Sendable, Equatable {
    /// What the step sends back.
    enum Reply: Sendable, Equatable {
        /// This HTTP status and body (`body` nil: the answer the fake gives without a scenario).
        case respond(httpStatus: Int, body: [UInt8]?)
        /// Never answer: the request stays open until the fake resets or shuts down.
        case stall
        /// Close the connection without answering.
        case drop
    }

    var reply: Reply
    /// Waited before answering, on top of the configured latency.
    var delayMs: Int

    /// The keys a step may hold.
    static let keys: Set<String> = ["status", "is_retryable", "fixture", "body", "http_status", "delay_ms", "action"]

    /// Parses one step. `fixture` reads a sample by file name; a step that makes no sense (unknown key, two
    /// bodies, an action with a body, a value of the wrong type) throws a message naming the key.
    static func parse(_ value: JSONValue, fixture: (String) throws(FakeScenarioError) -> [UInt8]) throws(FakeScenarioError) -> FakeStep {
        guard case .object(let step) = value else { throw FakeScenarioError("a step must be a JSON object") }
        if let unknown = step.keys.sorted().first(where: { !keys.contains($0) }) {
            throw FakeScenarioError("unknown key '\(unknown)' (expected \(keys.sorted().joined(separator: ", ")))")
        }
        let delayMs = try integer(step["delay_ms"], "delay_ms", in: 0...FakeAppStoreConfiguration.maxDelayMs) ?? 0
        let bodySources = ["status", "fixture", "body"].filter { step[$0] != nil }
        guard bodySources.count <= 1 else {
            throw FakeScenarioError("'\(bodySources.joined(separator: "' and '"))' cannot be combined: a step has one body")
        }
        if step["is_retryable"] != nil && step["status"] == nil {
            throw FakeScenarioError("'is_retryable' goes with 'status'")
        }
        if let action = step["action"] {
            guard bodySources.isEmpty, step["http_status"] == nil else {
                throw FakeScenarioError("'action' cannot be combined with a body or 'http_status'")
            }
            switch action {
            case "stall": return FakeStep(reply: .stall, delayMs: delayMs)
            case "drop": return FakeStep(reply: .drop, delayMs: delayMs)
            default: throw FakeScenarioError("'action' must be \"stall\" or \"drop\"")
            }
        }
        let httpStatus = try integer(step["http_status"], "http_status", in: 200...599) ?? 200
        var body: [UInt8]?
        if let status = try integer(step["status"], "status", in: 0...99_999) {
            var object: [String: JSONValue] = ["status": .int(status)]
            switch step["is_retryable"] {
            case nil: break
            case .bool(let flag)?: object["is-retryable"] = .bool(flag)
            case .int(let flag)? where flag == 0 || flag == 1: object["is-retryable"] = .bool(flag == 1)
            default: throw FakeScenarioError("'is_retryable' must be true, false, 1 or 0")
            }
            body = Array(JSONValue.object(object).jsonText.utf8)
        } else if let name = step["fixture"] {
            guard case .string(let name) = name else { throw FakeScenarioError("'fixture' must be a file name") }
            body = try fixture(name)
        } else if let literal = step["body"] {
            body = Array(literal.jsonText.utf8)
        } else if httpStatus != 200 {
            body = Array("HTTP \(httpStatus) from the fake App Store\n".utf8)
        }
        return FakeStep(reply: .respond(httpStatus: httpStatus, body: body), delayMs: delayMs)
    }

    private static func integer(_ value: JSONValue?, _ key: String, in range: ClosedRange<Int>) throws(FakeScenarioError) -> Int? {
        guard let value else { return nil }
        guard case .int(let number) = value, range.contains(number) else {
            throw FakeScenarioError("'\(key)' must be an integer in \(range.lowerBound)...\(range.upperBound)")
        }
        return number
    }
}

/// The answers programmed for one receipt: a list of steps per endpoint, taken in order, the last one
/// repeating. An endpoint without steps answers as it would without a scenario.
struct FakeScenario: Sendable, Equatable {
    var production: [FakeStep]
    var sandbox: [FakeStep]
    private var taken: [StoreEnvironment: Int] = [:]

    init(production: [FakeStep], sandbox: [FakeStep]) {
        self.production = production
        self.sandbox = sandbox
    }

    /// Takes the next step for `environment`'s endpoint; nil when none was programmed.
    mutating func next(for environment: StoreEnvironment) -> FakeStep? {
        let steps = environment == .production ? production : sandbox
        guard !steps.isEmpty else { return nil }
        let index = taken[environment, default: 0]
        taken[environment] = index + 1
        return steps[min(index, steps.count - 1)]
    }
}

/// Why a scenario or a step was refused; the message names the key.
struct FakeScenarioError: Error, Equatable {
    var message: String

    init(_ message: String) {
        self.message = message
    }
}
