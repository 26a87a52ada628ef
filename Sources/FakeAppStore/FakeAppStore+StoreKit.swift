import ServiceRuntime
import EntitlementModel
import Foundation

/// The StoreKit 2 part of the control API (documented on `FakeAppStore`): the signing chain's certificates,
/// purchases, their lifecycle, and server notifications.
extension FakeAppStore {
    func addStoreKitRoutes(to router: Router) {
        router.get("/control/signing/root.der") { [unowned self] _, _ in
            var headers = HTTPHeaders()
            headers.add("Content-Type", "application/pkix-cert")
            return HTTPResponse(headers: headers, body: signingChain.rootDER)
        }
        router.get("/control/signing/root.pem") { [unowned self] _, _ in
            .text(signingChain.rootPEM, contentType: "application/x-pem-file")
        }
        router.get("/control/signing") { [unowned self] _, _ in
            .json([
                "root": .string(Data(signingChain.rootDER).base64EncodedString()),
                "intermediate": .string(Data(signingChain.intermediateDER).base64EncodedString()),
                "leaf": .string(Data(signingChain.leafDER).base64EncodedString()),
                "bundle_id": .string(storeKit.settings.bundleID),
                "app_apple_id": .int(Int(storeKit.settings.appAppleID)),
            ] as JSONValue)
        }
        router.post("/control/storekit/purchases") { [unowned self] request, context in try await purchase(request) }
        router.get("/control/storekit/purchases/{original_transaction_id}") { [unowned self] request, context in
            try purchaseState(context.parameters["original_transaction_id"] ?? "")
        }
        router.post("/control/storekit/purchases/{original_transaction_id}/{action}") { [unowned self] request, context in
            try await change(request, original: context.parameters["original_transaction_id"] ?? "",
                             action: context.parameters["action"] ?? "")
        }
        router.get("/control/storekit/receipt") { [unowned self] request, context in try receipt(request) }
        router.post("/control/storekit/notifications") { [unowned self] request, context in try await notify(request) }
        router.post("/control/storekit/notifications/batch") { [unowned self] request, context in try await notifyBatch(request) }
    }

    /// The current time in Apple's milliseconds.
    static func nowMs() -> Int64 { Date().milliseconds }

    // MARK: - Purchases

    private static let purchaseKeys: Set<String> = [
        "product_id", "type", "app_account_token", "environment", "quantity", "purchase_date", "expires_date",
        "original_transaction_id", "transaction_id", "period", "price", "currency", "storefront",
        "in_app_ownership_type", "subscription_group_identifier", "notify", "customer", "order_id",
    ]

    private static let productTypes = Dictionary(uniqueKeysWithValues: ProductType.allCases.map { ($0.rawValue, $0) })

    private func purchase(_ request: HTTPRequest) async throws -> HTTPResponse {
        let body = try FakeControlBody(request, allowed: Self.purchaseKeys)
        var purchase = FakeStoreKit.Purchase()
        purchase.productID = try body.string("product_id")
        purchase.type = try body.choice("type", Self.productTypes)
        if let token = try body.string("app_account_token") {
            guard let uuid = UUID(uuidString: token) else { throw body.problem("app_account_token", "a UUID") }
            purchase.appAccountToken = uuid.uuidString.lowercased()
        }
        purchase.environment = try body.choice("environment", Self.environments)
        purchase.quantity = try body.int("quantity", in: 1...100)
        purchase.purchaseDate = try body.date("purchase_date")
        purchase.expiresDate = try body.date("expires_date")
        purchase.originalTransactionID = try body.string("original_transaction_id")
        purchase.transactionID = try body.string("transaction_id")
        if let period = try body.string("period") {
            guard let duration = try? ISODuration(parsing: period), !duration.isZero else {
                throw body.problem("period", "an ISO 8601 duration such as \"P1M\"")
            }
            purchase.period = duration
        }
        purchase.price = try body.int("price", in: 0...1_000_000_000).map(Int64.init)
        purchase.currency = try body.code("currency", "an ISO 4217 code such as \"USD\"")
        purchase.storefront = try body.code("storefront", "an ISO 3166-1 alpha-3 code such as \"USA\"")
        purchase.ownership = try body.choice("in_app_ownership_type", ["PURCHASED": Ownership.purchased, "FAMILY_SHARED": .familyShared])
        purchase.subscriptionGroupIdentifier = try body.string("subscription_group_identifier")
        purchase.customer = try body.string("customer")
        if let order = try body.string("order_id") {
            guard order.utf8.count <= 64, order.utf8.allSatisfy({ (48...57).contains($0) || (65...90).contains($0) }) else {
                throw body.problem("order_id", "capital letters and digits, such as \"MV3ZZZZZZZ\"")
            }
            purchase.orderID = order
        }
        let notify = try notifyRequest(body)
        let now = Self.nowMs()
        let change = try storeKitChange { (store: inout FakeStoreKit) throws(FakeStoreKitError) in try store.purchase(purchase, now: now) }
        return try await answer(change, notify: notify, now: now, status: 201)
    }

    /// The purchase `original` now: `{"original_transaction_id", "type", "status"?, "transactions": [{"transaction_id",
    /// "signed_transaction", "payload"}], "signed_renewal_info"?, "renewal_info"?}`.
    private func purchaseState(_ original: String) throws -> HTTPResponse {
        let chain = storeKit.chain(original)
        guard let first = chain.first else {
            throw ProblemError(status: 404, detail: "No purchase has original transaction id '\(original)'.")
        }
        let now = Self.nowMs()
        var answer: [String: JSONValue] = [
            "original_transaction_id": .string(original),
            "type": .string(first.type.rawValue),
            "transactions": .array(chain.map { transaction in
                let payload = FakeStoreKit.payload(transaction, signedDate: now)
                return [
                    "transaction_id": .string(transaction.transactionID), "order_id": .string(transaction.orderID),
                    "signed_transaction": .string(signingChain.sign(payload)), "payload": payload,
                ]
            }),
        ]
        addRenewal(of: original, to: &answer, now: now)
        return .json(JSONValue.object(answer))
    }

    // MARK: - Lifecycle

    private static let notifyKeys = notificationKeys.union(["url", "parallel"])

    /// The members each lifecycle action takes, besides `notify`.
    private static let actionKeys: [String: Set<String>] = [
        "renew": ["product_id", "transaction_id", "purchase_date", "expires_date"],
        "refund": ["transaction_id", "revocation_reason", "revocation_date"],
        "revoke": ["transaction_id", "revocation_reason", "revocation_date"],
        "reverse_refund": ["transaction_id"],
        "expire": ["expiration_intent", "expires_date"],
        "billing_retry": [],
        "grace_period": ["grace_period_expires_date"],
        "auto_renew_off": [],
        "auto_renew_on": [],
        "upgrade": ["product_id", "transaction_id", "expires_date"],
        "downgrade": ["product_id"],
    ]

    private func change(_ request: HTTPRequest, original: String, action: String) async throws -> HTTPResponse {
        guard let keys = Self.actionKeys[action] else {
            throw ProblemError(status: 404, detail: "Unknown action '\(action)' (expected \(Self.actionKeys.keys.sorted().joined(separator: ", "))).")
        }
        let body = try FakeControlBody(request, allowed: keys.union(["notify"]), emptyAllowed: true)
        let notify = try notifyRequest(body)
        let now = Self.nowMs()
        let transactionID = try body.string("transaction_id")
        let change: FakeStoreKit.Change
        switch action {
        case "renew":
            let product = try body.string("product_id"), purchased = try body.date("purchase_date"), expires = try body.date("expires_date")
            change = try storeKitChange { (store: inout FakeStoreKit) throws(FakeStoreKitError) in
                try store.renew(original, productID: product, transactionID: transactionID, purchaseDate: purchased, expiresDate: expires, now: now)
            }
        case "refund", "revoke":
            let reason = try body.int("revocation_reason", in: 0...1) ?? 0, date = try body.date("revocation_date")
            change = try storeKitChange { (store: inout FakeStoreKit) throws(FakeStoreKitError) in
                try store.revoke(original, transactionID: transactionID, reason: reason, date: date, familyRevoke: action == "revoke", now: now)
            }
        case "reverse_refund":
            change = try storeKitChange { (store: inout FakeStoreKit) throws(FakeStoreKitError) in try store.reverseRefund(original, transactionID: transactionID) }
        case "expire":
            let intent = try body.int("expiration_intent", in: 1...5) ?? 1, date = try body.date("expires_date")
            change = try storeKitChange { (store: inout FakeStoreKit) throws(FakeStoreKitError) in try store.expire(original, intent: intent, date: date, now: now) }
        case "billing_retry", "grace_period":
            let grace = action == "grace_period" ? try body.date("grace_period_expires_date") ?? now + FakeStoreKit.defaultGraceMs : nil
            change = try storeKitChange { (store: inout FakeStoreKit) throws(FakeStoreKitError) in try store.failRenewal(original, graceUntil: grace, now: now) }
        case "auto_renew_off", "auto_renew_on":
            change = try storeKitChange { (store: inout FakeStoreKit) throws(FakeStoreKitError) in try store.setAutoRenew(original, action == "auto_renew_on") }
        case "upgrade", "downgrade":
            guard let product = try body.string("product_id") else { throw body.problem("product_id", "the product to change to") }
            let expires = try body.date("expires_date")
            change = try storeKitChange { (store: inout FakeStoreKit) throws(FakeStoreKitError) in
                action == "upgrade"
                    ? try store.upgrade(original, to: product, transactionID: transactionID, expiresDate: expires, now: now)
                    : try store.downgrade(original, to: product)
            }
        default:
            preconditionFailure("action '\(action)' listed without a handler")
        }
        return try await answer(change, notify: notify, now: now, status: 200)
    }

    /// The `notify` member of a purchase or a change: where to send the notification the change causes, and
    /// how (the members of `POST /control/storekit/notifications`; the type and subtype default to the
    /// change's, the transaction to the one the change concerns). Read before the change is made, so that a
    /// malformed one changes nothing.
    struct NotifyRequest {
        var url: String
        var parallel: Bool
        var order: NotificationOrder
        /// Whether `notify` named the type, which then replaces the change's.
        var typeNamed: Bool
    }

    private func notifyRequest(_ body: FakeControlBody) throws -> NotifyRequest? {
        guard let notify = try body.object("notify", allowed: Self.notifyKeys) else { return nil }
        return NotifyRequest(
            url: try Self.deliveryURL(notify), parallel: try notify.bool("parallel") ?? false,
            order: try notificationOrder(notify, type: ""), typeNamed: try notify.string("notification_type") != nil)
    }

    /// Runs `body` on the store, turning its refusal into a problem response.
    private func storeKitChange(_ body: (inout FakeStoreKit) throws(FakeStoreKitError) -> FakeStoreKit.Change) throws -> FakeStoreKit.Change {
        do {
            return try body(&storeKit)
        } catch {
            throw ProblemError(status: error.status, detail: error.message, extra: error.field.map { ["field": .string($0)] } ?? [:])
        }
    }

    /// The answer to a purchase or a change: the transaction it concerns, signed now, its subscription's
    /// renewal info and status, the notification Apple would send, and (with `notify`) that notification
    /// as sent.
    private func answer(_ change: FakeStoreKit.Change, notify: NotifyRequest?, now: Int64, status: Int) async throws -> HTTPResponse {
        guard let transaction = storeKit.transactions[change.transactionID] else {
            preconditionFailure("a change names transaction \(change.transactionID), which the store lacks")
        }
        // Read before any suspension, so that the answer shows the state this change left.
        let payload = FakeStoreKit.payload(transaction, signedDate: now)
        var answer: [String: JSONValue] = [
            "transaction_id": .string(transaction.transactionID),
            "original_transaction_id": .string(transaction.originalTransactionID),
            "type": .string(transaction.type.rawValue),
            "order_id": .string(transaction.orderID),
            "customer": .string(transaction.customer),
            "signed_transaction": .string(signingChain.sign(payload)),
            "payload": payload,
            "notification_type": .string(change.notificationType),
            "subtype": change.subtype.map(JSONValue.string) ?? .null,
        ]
        addRenewal(of: transaction.originalTransactionID, to: &answer, now: now)
        if let notify {
            var order = notify.order
            if !notify.typeNamed {
                order.type = change.notificationType
                order.subtype = change.subtype
            }
            order.transactionID = order.transactionID ?? change.transactionID
            let notification = sign(order, now: now)
            let deliveries = await deliver(notification, to: notify.url, parallel: notify.parallel)
            answer["notification"] = .object(Self.report(notification, deliveries: deliveries))
        }
        return .json(JSONValue.object(answer), status: status)
    }

    /// Adds `signed_renewal_info`, `renewal_info` and `status` when `original` is an auto-renewable subscription.
    private func addRenewal(of original: String, to answer: inout [String: JSONValue], now: Int64) {
        guard let renewal = storeKit.renewalPayload(original, signedDate: now) else { return }
        answer["signed_renewal_info"] = .string(signingChain.sign(renewal))
        answer["renewal_info"] = renewal
        answer["status"] = storeKit.status(of: original, now: now).map { .int($0.rawValue) }
    }

    /// `GET /control/storekit/receipt?environment=Sandbox&app_account_token=...`: `{"receipt_data"}`.
    private func receipt(_ request: HTTPRequest) throws -> HTTPResponse {
        let name = request.query["environment"] ?? "Sandbox"
        guard let environment = Self.environments[name] else {
            throw ProblemError.badRequest("The query parameter 'environment' must be Production or Sandbox.", field: "environment")
        }
        let token = request.query["app_account_token"].map { UUID(uuidString: $0)?.uuidString.lowercased() ?? $0 }
        let receipt = storeKit.receipt(environment: environment, appAccountToken: token)
        return .json(["receipt_data": .string(receipt.receiptData)] as JSONValue)
    }

    // MARK: - Notifications

    private func notify(_ request: HTTPRequest) async throws -> HTTPResponse {
        let body = try FakeControlBody(request, allowed: Self.notifyKeys)
        let url = try Self.deliveryURL(body)
        let order = try notificationOrder(body)
        let parallel = try body.bool("parallel") ?? false
        let notification = sign(order, now: Self.nowMs())
        let deliveries = await deliver(notification, to: url, parallel: parallel)
        return .json(JSONValue.object(Self.report(notification, deliveries: deliveries)))
    }

    private func notifyBatch(_ request: HTTPRequest) async throws -> HTTPResponse {
        let body = try FakeControlBody(request, allowed: ["url", "notifications", "shuffle", "seed", "concurrency"])
        let url = try Self.deliveryURL(body)
        guard let items = try body.objects("notifications", allowed: Self.notificationKeys, limit: Self.maxDeliveries) else {
            throw body.problem("notifications", "an array of notifications")
        }
        let orders = try items.map { try notificationOrder($0) }
        guard orders.reduce(0, { $0 + $1.copies }) <= Self.maxDeliveries else {
            throw body.problem("notifications", "at most \(Self.maxDeliveries) deliveries in all (copies included)")
        }
        let shuffle = try body.bool("shuffle") ?? true
        let seed = try body.int("seed", in: 0...Int.max).map(UInt64.init)
        let concurrency = try body.int("concurrency", in: 1...64) ?? 4
        let now = Self.nowMs()
        let notifications = orders.map { sign($0, now: now) }
        let (outcomes, order) = await deliverBatch(notifications, to: url, shuffle: shuffle, seed: seed, concurrency: concurrency)
        let delivered = outcomes.joined().filter { if case .object(let o) = $0, case .int(let s)? = o["status"] { (200..<300).contains(s) } else { false } }
        return .json([
            "sent": .int(order.count),
            "delivered": .int(delivered.count),
            "order": .array(order.map { .int($0) }),
            "notifications": .array(notifications.indices.map { index in
                .object([
                    "notification_uuid": .string(notifications[index].uuid),
                    "notification_type": .string(notifications[index].order.type),
                    "transaction_id": notifications[index].order.transactionID.map(JSONValue.string) ?? .null,
                    "statuses": .array(outcomes[index].map { outcome in
                        if case .object(let members) = outcome { members["status"] ?? .null } else { .null }
                    }),
                ])
            }),
        ] as JSONValue)
    }
}
