import ServiceRuntime
import EntitlementModel
import Foundation

/// App Store Server Notifications V2 from the fake: built from the StoreKit store, signed by the fake's
/// chain and POSTed as `{"signedPayload": "..."}` with the runtime's `HTTPClient` (libcurl on the loop).
extension FakeAppStore {
    /// One notification to build and send, as a control request describes it.
    struct NotificationOrder {
        var type: String
        var subtype: String?
        var transactionID: String?
        var environment: StoreEnvironment?
        var uuid: String?
        var signedDate: Int64?
        /// How many times the same signed payload is sent (Apple's retries keep the notificationUUID).
        var copies: Int
        /// Alter the payload after signing, so that the signature no longer verifies.
        var tamper: Bool
        var delayMs: Int
    }

    /// A notification ready to send.
    struct SignedNotification {
        var order: NotificationOrder
        var uuid: String
        /// The decoded payload as sent (altered when tampered).
        var payload: JSONValue
        var signedPayload: String
        /// The request body: `{"signedPayload": "..."}`.
        var body: [UInt8]
        /// The environment its `data` names and the purchase it is about, for the notification history.
        var environment: StoreEnvironment
        var originalTransactionID: String?
    }

    /// The members a notification order may have (besides `url`, `parallel` and the batch's own).
    static let notificationKeys: Set<String> = [
        "notification_type", "subtype", "transaction_id", "environment", "notification_uuid", "signed_date",
        "copies", "tamper", "delay_ms",
    ]

    /// The most deliveries one control request may ask for.
    static let maxDeliveries = 10_000

    static let environments: [String: StoreEnvironment] = ["Production": .production, "Sandbox": .sandbox]

    /// Reads a notification order from `body`; `type` is the default when it names none.
    func notificationOrder(_ body: FakeControlBody, type: String? = nil) throws -> NotificationOrder {
        guard let chosen = try body.string("notification_type") ?? type else {
            throw body.problem("notification_type", "a non-empty string such as \"DID_RENEW\"")
        }
        let order = NotificationOrder(
            type: chosen, subtype: try body.string("subtype"), transactionID: try body.string("transaction_id"),
            environment: try body.choice("environment", Self.environments), uuid: try body.string("notification_uuid"),
            signedDate: try body.date("signed_date"), copies: try body.int("copies", in: 1...100) ?? 1,
            tamper: try body.bool("tamper") ?? false,
            delayMs: try body.int("delay_ms", in: 0...FakeAppStoreConfiguration.maxDelayMs) ?? 0)
        if let id = order.transactionID, storeKit.transactions[id] == nil {
            throw ProblemError(status: 404, detail: "No transaction has id '\(id)'.", extra: ["field": "transaction_id"])
        }
        return order
    }

    /// The URL to deliver to: `http` or `https`.
    static func deliveryURL(_ body: FakeControlBody) throws -> String {
        guard let url = try body.string("url"), url.hasPrefix("http://") || url.hasPrefix("https://") else {
            throw body.problem("url", "an http:// or https:// URL")
        }
        return url
    }

    /// Builds and signs the notification `order` describes, at `now` (milliseconds).
    func sign(_ order: NotificationOrder, now: Int64) -> SignedNotification {
        let uuid = order.uuid ?? UUID().uuidString.lowercased()
        let signedDate = order.signedDate ?? now
        var payload = storeKit.notificationPayload(
            type: order.type, subtype: order.subtype, uuid: uuid, transactionID: order.transactionID,
            environment: order.environment ?? .sandbox, signedDate: signedDate, now: now, chain: signingChain)
        var signed = signingChain.sign(payload)
        if order.tamper, case .object(var members) = payload {
            // The signed date one millisecond later: a payload that reads as genuine, with a signature that no
            // longer covers it.
            members["signedDate"] = .int(Int(signedDate) + 1)
            payload = .object(members)
            let parts = signed.split(separator: ".")
            signed = parts[0] + "." + FakeSigningChain.base64URL(Array(payload.jsonText.utf8)) + "." + parts[2]
        }
        let body = Array((["signedPayload": .string(signed)] as JSONValue).jsonText.utf8)
        let transaction = order.transactionID.flatMap { storeKit.transactions[$0] }
        return SignedNotification(order: order, uuid: uuid, payload: payload, signedPayload: signed, body: body,
                                  environment: transaction?.environment ?? order.environment ?? .sandbox,
                                  originalTransactionID: transaction?.originalTransactionID)
    }

    /// Sends `notification` to `url` as many times as it asks, one after the other or, when `parallel`, all
    /// at once; each delivery's outcome in order: `{"status": N}`, or `{"status": null, "error": "..."}`.
    func deliver(_ notification: SignedNotification, to url: String, parallel: Bool) async -> [JSONValue] {
        if notification.order.delayMs > 0, await !hold(milliseconds: notification.order.delayMs) {
            return Array(repeating: Self.released, count: notification.order.copies)
        }
        guard parallel else {
            var outcomes: [JSONValue] = []
            for _ in 0..<notification.order.copies { outcomes.append(await post(notification, to: url)) }
            return outcomes
        }
        let copies = (0..<notification.order.copies).map { _ in Task.onLoop { await self.post(notification, to: url) } }
        var outcomes: [JSONValue] = []
        for copy in copies { outcomes.append(await copy.value) }
        return outcomes
    }

    /// Sends every copy of every notification of `notifications` to `url`, in a random order (seeded by
    /// `seed` when given, so a test can replay it) or in the given order, by `concurrency` deliveries at a
    /// time. Returns the outcomes per notification and, per delivery in sending order, the notification's
    /// index.
    func deliverBatch(
        _ notifications: [SignedNotification], to url: String, shuffle: Bool, seed: UInt64?, concurrency: Int
    ) async -> (outcomes: [[JSONValue]], order: [Int]) {
        var order = notifications.indices.flatMap { index in Array(repeating: index, count: notifications[index].order.copies) }
        if shuffle {
            if let seed {
                var generator = SplitMix64(seed: seed)
                order.shuffle(using: &generator)
            } else {
                order.shuffle()
            }
        }
        let queue = DeliveryQueue(order: order)
        let workers = (0..<min(concurrency, order.count)).map { _ in
            Task.onLoop {
                var done: [(Int, JSONValue)] = []
                while let index = queue.next() {
                    let notification = notifications[index]
                    if notification.order.delayMs > 0, await !self.hold(milliseconds: notification.order.delayMs) {
                        done.append((index, Self.released))
                    } else {
                        done.append((index, await self.post(notification, to: url)))
                    }
                }
                return done
            }
        }
        var outcomes = Array(repeating: [JSONValue](), count: notifications.count)
        for worker in workers {
            for (index, outcome) in await worker.value { outcomes[index].append(outcome) }
        }
        return (outcomes, order)
    }

    /// The outcome of a delivery whose delay a reset or the shutdown cut short: it was not sent.
    private static let released: JSONValue = ["status": nil, "error": "not sent: released by a reset or the shutdown"]

    /// One POST of `notification` to `url`, recorded as an attempt in the notification history (unless the
    /// notification is tampered, which Apple never sends).
    private func post(_ notification: SignedNotification, to url: String) async -> JSONValue {
        let attempted = Self.nowMs()
        let outcome: JSONValue, result: String
        do {
            let response = try await notifier.post(url: url, body: notification.body, headers: [("Content-Type", "application/json")])
            outcome = ["status": .int(response.status)]
            result = (200..<300).contains(response.status) ? "SUCCESS" : "UNSUCCESSFUL_HTTP_RESPONSE_CODE"
        } catch {
            outcome = ["status": nil, "error": .string(error.description)]
            result = switch error.kind {
            case .timeout: "TIMED_OUT"
            case .connect: "NO_RESPONSE"
            case .tls: "TLS_ISSUE"
            case .connectionDropped: "PREMATURE_CLOSE"
            default: "OTHER"
            }
        }
        if !notification.order.tamper {
            notificationLog.record(
                FakeNotificationLog.Entry(
                    uuid: notification.uuid, signedPayload: notification.signedPayload, environment: notification.environment,
                    type: notification.order.type, subtype: notification.order.subtype,
                    originalTransactionID: notification.originalTransactionID, attempts: []),
                attempt: attempted, result: result)
        }
        return outcome
    }

    /// What a control request answers about one notification it sent.
    static func report(_ notification: SignedNotification, deliveries: [JSONValue]) -> [String: JSONValue] {
        [
            "notification_uuid": .string(notification.uuid),
            "notification_type": .string(notification.order.type),
            "subtype": notification.order.subtype.map(JSONValue.string) ?? .null,
            "transaction_id": notification.order.transactionID.map(JSONValue.string) ?? .null,
            "tampered": .bool(notification.order.tamper),
            "signed_payload": .string(notification.signedPayload),
            "payload": notification.payload,
            "deliveries": .array(deliveries),
        ]
    }
}

/// The deliveries of a batch not yet taken by a worker.
@Loop
private final class DeliveryQueue {
    private let order: [Int]
    private var position = 0

    init(order: [Int]) { self.order = order }

    func next() -> Int? {
        guard position < order.count else { return nil }
        defer { position += 1 }
        return order[position]
    }
}

/// A small seeded generator (SplitMix64), so that a batch's order can be replayed.
struct SplitMix64: RandomNumberGenerator {
    private var state: UInt64

    init(seed: UInt64) { state = seed }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
