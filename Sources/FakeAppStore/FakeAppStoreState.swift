import ServiceRuntime
import EntitlementModel
import Foundation

/// What the fake App Store knows and decides, free of I/O: its settings, the scenarios programmed per
/// receipt, the log of what it received, and the answer to each verifyReceipt request. `FakeAppStore` is the
/// HTTP shell that carries the answers out (waits on loop timers, writes or holds the response).
struct FakeAppStoreState {
    /// How to answer one verifyReceipt request.
    struct Reply: Equatable {
        enum Action: Equatable {
            /// Send this HTTP status and body.
            case respond(httpStatus: Int, body: [UInt8])
            /// Hold the request without answering.
            case stall
            /// Close the connection without answering.
            case drop
        }

        /// Wait this long first (the configured latency plus the step's delay).
        var delayMs: Int
        var action: Action
    }

    /// One verifyReceipt request as it arrived.
    struct ReceivedRequest: Equatable {
        var environment: StoreEnvironment
        /// The `password` member (the shared secret the client sent), kept for tests to check.
        var password: String?
        var receiptData: String?
        var excludeOldTransactions: Bool?
    }

    /// How many received requests the log keeps (the newest); the counters count them all.
    static let keptRequests = 1_000

    private let initial: FakeAppStoreConfiguration
    /// The settings in force (the start configuration changed by `configure`).
    private(set) var configuration: FakeAppStoreConfiguration
    private var scenarios: [String: FakeScenario] = [:]
    /// Answers rendered lately (see `answer`); emptied when it reaches `renderedLimit` entries.
    private var rendered: [AnswerKey: (second: Double, body: [UInt8])] = [:]
    private static let renderedLimit = 256
    /// The newest received requests, oldest first.
    private(set) var received: [ReceivedRequest] = []
    /// verifyReceipt requests received per endpoint since the start or the last reset.
    private(set) var counts: [StoreEnvironment: Int] = [:]

    init(configuration: FakeAppStoreConfiguration) {
        initial = configuration
        self.configuration = configuration
    }

    /// Changes the settings given; `sharedSecret: .some(nil)` stops checking the password.
    mutating func configure(sharedSecret: String??, latencyMs: Int?, outage: Bool?) {
        if let sharedSecret { configuration.sharedSecret = sharedSecret }
        if let latencyMs { configuration.latencyMs = latencyMs }
        if let outage { configuration.outage = outage }
    }

    /// Programs the answers for `receiptData`, replacing an earlier scenario for it.
    mutating func setScenario(_ scenario: FakeScenario, for receiptData: String) {
        scenarios[receiptData] = scenario
    }

    /// Back to the start configuration, with no scenario and an empty log.
    mutating func reset() {
        configuration = initial
        scenarios = [:]
        rendered = [:]
        received = []
        counts = [:]
    }

    /// Records a request posted to `environment`'s verifyReceipt endpoint and decides its answer, in the
    /// order Apple's checks would run: an outage answers HTTP 503; a body that is not a JSON object `21000`; a
    /// wrong or missing password (when a shared secret is configured) `21004`; then the receipt's scenario,
    /// if one was programmed for this endpoint; else a fake receipt verifies in its own environment (`21007`
    /// from production for a sandbox receipt, `21008` from sandbox for a production one), and anything else
    /// is `21002`. `now`, truncated to the second, is the answer's `request_date`.
    mutating func verify(environment: StoreEnvironment, body: [UInt8], now: Date) -> Reply {
        let request = try? JSONDecoder().decode(JSONValue.self, from: Data(body))
        let fields: [String: JSONValue]? = if case .object(let fields)? = request { fields } else { nil }
        let receiptData: String? = if case .string(let text)? = fields?["receipt-data"] { text } else { nil }
        let password: String? = if case .string(let text)? = fields?["password"] { text } else { nil }
        let exclude: Bool? = if case .bool(let flag)? = fields?["exclude-old-transactions"] { flag } else { nil }
        record(ReceivedRequest(environment: environment, password: password, receiptData: receiptData, excludeOldTransactions: exclude))

        let latency = configuration.latencyMs
        if configuration.outage {
            return Reply(delayMs: latency, action: .respond(httpStatus: 503, body: Array("The App Store is unavailable (fake outage).\n".utf8)))
        }
        guard fields != nil else { return Reply(delayMs: latency, action: .respond(httpStatus: 200, body: Self.status(21000))) }
        if let secret = configuration.sharedSecret, password != secret {
            return Reply(delayMs: latency, action: .respond(httpStatus: 200, body: Self.status(21004)))
        }
        guard let receiptData, var scenario = scenarios[receiptData], let step = scenario.next(for: environment) else {
            let body = answer(receiptData: receiptData, environment: environment, excludeOld: exclude ?? false, now: now)
            return Reply(delayMs: latency, action: .respond(httpStatus: 200, body: body))
        }
        scenarios[receiptData] = scenario
        switch step.reply {
        case .stall:
            return Reply(delayMs: latency + step.delayMs, action: .stall)
        case .drop:
            return Reply(delayMs: latency + step.delayMs, action: .drop)
        case .respond(let httpStatus, let body):
            let body = body ?? answer(receiptData: receiptData, environment: environment, excludeOld: exclude ?? false, now: now)
            return Reply(delayMs: latency + step.delayMs, action: .respond(httpStatus: httpStatus, body: body))
        }
    }

    /// The body without a scenario: a fake receipt's answer, a redirect status, or `21002`. Answers are
    /// rendered once per receipt, endpoint and second (`request_date` is a whole second), so a receipt posted
    /// again and again (retries, a benchmark) costs a lookup rather than a decode and a render.
    private mutating func answer(receiptData: String?, environment: StoreEnvironment, excludeOld: Bool, now: Date) -> [UInt8] {
        guard let receiptData else { return Self.status(21002) }
        let key = AnswerKey(receiptData: receiptData, environment: environment, excludeOld: excludeOld)
        let second = now.timeIntervalSince1970.rounded(.down)
        if let cached = rendered[key], cached.second == second { return cached.body }
        let body: [UInt8]
        switch FakeReceipt(receiptData: receiptData).map({ ($0, $0.environment, environment) }) {
        case nil: body = Self.status(21002)
        case (_, .sandbox, .production)?: body = Self.status(21007)
        case (_, .production, .sandbox)?: body = Self.status(21008)
        case (let receipt, _, _)?:
            body = Array(receipt.verifyReceiptBody(
                receiptData: receiptData, requestDate: Date(timeIntervalSince1970: second), excludeOldTransactions: excludeOld
            ).jsonText.utf8)
        }
        if rendered.count >= Self.renderedLimit { rendered.removeAll() }
        rendered[key] = (second, body)
        return body
    }

    private struct AnswerKey: Hashable {
        var receiptData: String
        var environment: StoreEnvironment
        var excludeOld: Bool
    }

    private static func status(_ status: Int) -> [UInt8] {
        Array(#"{"status":\#(status)}"#.utf8)
    }

    private mutating func record(_ request: ReceivedRequest) {
        counts[request.environment, default: 0] += 1
        if received.count == Self.keptRequests { received.removeFirst() }
        received.append(request)
    }
}
