import EntitlementModel
import Foundation
import ServiceRuntime

/// What the fake App Store Server API decides before it reads the purchase store, free of I/O: its settings
/// (latency, outage, a rate limit of its own, a fault rate), the answers programmed per endpoint and
/// environment, and the log of the requests it received. `FakeAppStore` carries the decisions out.
struct FakeServerAPIState {
    /// The settings `PUT /control/server-api/config` changes.
    struct Settings: Equatable {
        /// How long every answer waits (on a loop timer) before it goes out.
        var latencyMs = 0
        /// When true, every request is answered HTTP 503 (plain text), as when Apple's front end is down.
        var outage = false
        /// Requests per second per endpoint and environment; more in the same second are answered 429 with
        /// `Retry-After` the next second (UNIX milliseconds). Nil: no limit.
        var ratePerSecond: Int?
        /// The share of requests (0...1) answered `faultErrorCode` instead (or one of `faultMix`), drawn from a
        /// generator seeded by `faultSeed` so that a run can be replayed.
        var faultRate = 0.0
        var faultErrorCode = 5_000_001
        var faultSeed: UInt64 = 1
        /// The faults to draw from, each as likely (any kind of step: an error code, a status, a delay past the
        /// client's timeout, a dropped connection); empty: `faultErrorCode` alone.
        var faultMix: [Step] = []
    }

    /// One programmed answer, taken in order by the requests its scenario matches.
    struct Step: Equatable {
        /// The HTTP status; nil: `errorCode`'s (`4040010` → 404), or the store's own answer without either.
        var status: Int?
        var errorCode: Int?
        var errorMessage: String?
        /// `Retry-After` of a 429: this many milliseconds after the answer, as a UNIX time in milliseconds.
        var retryAfterMs: Int?
        /// `Retry-After` exactly as given (to send what Apple would not).
        var retryAfter: String?
        /// Wait this long before answering (added to the latency).
        var delayMs = 0
        /// Close the connection without answering.
        var drop = false
    }

    /// Which requests a scenario's steps answer: an endpoint and an environment, nil for any.
    struct ScenarioKey: Hashable {
        var endpoint: ServerAPIEndpoint?
        var environment: StoreEnvironment?
    }

    /// What to do with one request.
    enum Decision: Equatable {
        /// Answer from the purchase store, after `delayMs`.
        case serve(delayMs: Int)
        /// Send this status, `Retry-After` (when set) and body, after `delayMs`.
        case respond(status: Int, retryAfter: String?, body: Body, delayMs: Int)
        /// Close the connection without answering, after `delayMs`.
        case drop(delayMs: Int)
    }

    /// The body of a programmed or refused answer.
    enum Body: Equatable {
        /// Apple's JSON error: `{"errorCode", "errorMessage"}`.
        case error(code: Int, message: String)
        /// Plain text, as Apple's front end answers a 401 or an outage.
        case text(String)
    }

    /// One request as it arrived, for `GET /control/server-api/requests`.
    struct Received: Equatable {
        /// Its number among every request received.
        var sequence: Int
        var endpoint: ServerAPIEndpoint
        var environment: StoreEnvironment
        var path: String
        /// Why the token was refused; nil when it was accepted.
        var refusal: String?
        /// The token's header and claims as read (nothing when it could not be read).
        var token: ServerAPIToken?
        /// The HTTP status answered; nil while the answer is pending and for a dropped connection.
        var status: Int?
    }

    /// How many received requests the log keeps (the newest); the counters count them all.
    static let keptRequests = 1_000

    private let initial: Settings
    private(set) var settings: Settings
    private var scenarios: [ScenarioKey: [Step]] = [:]
    /// Requests per endpoint and environment in the current second, for the rate limit.
    private var window: [String: (second: Int64, count: Int)] = [:]
    private var faults: SplitMix64
    private(set) var received: [Received] = []
    private(set) var counts: [String: Int] = [:]
    /// What was answered, and whether clients held back after each 429 until its `Retry-After`.
    private(set) var tally = FakeServerAPITally()
    private var sequence = 0

    init(settings: Settings = Settings()) {
        initial = settings
        self.settings = settings
        faults = SplitMix64(seed: settings.faultSeed)
    }

    /// Replaces the settings (the fault generator restarts from the new seed).
    mutating func configure(_ settings: Settings) {
        self.settings = settings
        faults = SplitMix64(seed: settings.faultSeed)
    }

    /// Programs `steps` for the requests `key` matches, replacing the steps left there.
    mutating func setScenario(_ steps: [Step], for key: ScenarioKey) {
        scenarios[key] = steps
    }

    /// Back to the start settings, with no scenario and an empty log.
    mutating func reset() {
        self = FakeServerAPIState(settings: initial)
    }

    /// Records a request to `endpoint` in `environment` and decides its answer, in this order: an outage
    /// answers 503; a refused token 401 (Apple's plain `Unauthenticated`); then the next step programmed for
    /// the request (the most specific scenario first: endpoint and environment, endpoint, environment, any);
    /// then the rate limit (429 `4290000`); then a fault draw; else the store answers. `now` is in
    /// milliseconds since 1970. Returns the decision and the request's sequence number, for `answered`.
    mutating func decide(_ endpoint: ServerAPIEndpoint, _ environment: StoreEnvironment, path: String,
                         token: ServerAPIToken?, refusal: String?, now: Int64) -> (Decision, sequence: Int) {
        counts[endpoint.budgetKey(in: environment), default: 0] += 1
        sequence += 1
        if received.count == Self.keptRequests { received.removeFirst() }
        received.append(Received(sequence: sequence, endpoint: endpoint, environment: environment, path: path, refusal: refusal, token: token))
        tally.arrived(now: now)
        let chosen = choose(endpoint, environment, refused: refusal != nil, now: now)
        if case .respond(429, let retryAfter?, _, let delay) = chosen, let until = Int64(retryAfter) {
            tally.rateLimited(answeredAt: now + Int64(delay), until: until)
        }
        if case .drop = chosen { tally.dropped += 1 }
        return (chosen, sequence)
    }

    /// Notes the HTTP status the request `sequence` was answered with.
    mutating func answered(_ sequence: Int, status: Int) {
        tally.statuses[status, default: 0] += 1
        guard let index = received.lastIndex(where: { $0.sequence == sequence }) else { return }
        received[index].status = status
    }

    private mutating func choose(_ endpoint: ServerAPIEndpoint, _ environment: StoreEnvironment, refused: Bool, now: Int64) -> Decision {
        let latency = settings.latencyMs
        if settings.outage {
            return .respond(status: 503, retryAfter: nil, body: .text("Service Unavailable (fake outage)\n"), delayMs: latency)
        }
        if refused { return .respond(status: 401, retryAfter: nil, body: .text("Unauthenticated\n"), delayMs: latency) }
        if let step = nextStep(endpoint, environment) { return decision(step, now: now) }
        if let limit = settings.ratePerSecond {
            let key = endpoint.budgetKey(in: environment), second = now / 1_000
            let count = (window[key]?.second == second ? window[key]!.count : 0) + 1
            window[key] = (second, count)
            if count > limit {
                return .respond(status: 429, retryAfter: String((second + 1) * 1_000),
                                body: .error(code: 4_290_000, message: Self.message(4_290_000)), delayMs: latency)
            }
        }
        if settings.faultRate > 0, Double.random(in: 0..<1, using: &faults) < settings.faultRate {
            tally.faults += 1
            guard settings.faultMix.isEmpty else {
                return decision(settings.faultMix[Int.random(in: 0..<settings.faultMix.count, using: &faults)], now: now)
            }
            let code = settings.faultErrorCode
            return .respond(status: code / 10_000, retryAfter: nil, body: .error(code: code, message: Self.message(code)), delayMs: latency)
        }
        return .serve(delayMs: latency)
    }

    /// What `step` answers, after the latency and its own delay.
    private func decision(_ step: Step, now: Int64) -> Decision {
        let delay = settings.latencyMs + step.delayMs
        if step.drop { return .drop(delayMs: delay) }
        guard step.status != nil || step.errorCode != nil else { return .serve(delayMs: delay) }
        let status = step.status ?? step.errorCode! / 10_000
        let retryAfter = step.retryAfter ?? (status == 429 ? String(now + Int64(step.retryAfterMs ?? 1_000)) : nil)
        let code = step.errorCode ?? (status == 429 ? 4_290_000 : nil)
        let body: Body = code.map { .error(code: $0, message: step.errorMessage ?? Self.message($0)) }
            ?? .text(status == 401 ? "Unauthenticated\n" : "HTTP \(status) (fake)\n")
        return .respond(status: status, retryAfter: retryAfter, body: body, delayMs: delay)
    }

    /// Takes the next step of the most specific scenario that matches and has one left.
    private mutating func nextStep(_ endpoint: ServerAPIEndpoint, _ environment: StoreEnvironment) -> Step? {
        let keys = [ScenarioKey(endpoint: endpoint, environment: environment), ScenarioKey(endpoint: endpoint, environment: nil),
                    ScenarioKey(endpoint: nil, environment: environment), ScenarioKey(endpoint: nil, environment: nil)]
        for key in keys {
            guard var steps = scenarios[key], !steps.isEmpty else { continue }
            let step = steps.removeFirst()
            scenarios[key] = steps
            return step
        }
        return nil
    }

    /// Apple's `errorMessage` for the codes the fake answers on its own; a generic one for the others.
    static func message(_ code: Int) -> String {
        switch code {
        case 4_000_006: "Invalid transaction id."
        case 4_000_012: "Invalid request. The start date is earlier than the allowed start date."
        case 4_000_013: "Invalid request. The end date precedes the start date or the dates are the same."
        case 4_000_014: "Invalid request. The pagination token is invalid."
        case 4_000_015: "Invalid request. The start date is not a timestamp value represented in milliseconds."
        case 4_000_016: "Invalid request. The end date is not a timestamp value represented in milliseconds."
        case 4_040_005: "Original transaction id not found."
        case 4_040_010: "Transaction id not found."
        case 4_290_000: "Rate limit exceeded."
        case 5_000_000: "An unknown error occurred."
        case 5_000_001: "An unknown error occurred. Please try again."
        default: "Error \(code) (fake)."
        }
    }
}
