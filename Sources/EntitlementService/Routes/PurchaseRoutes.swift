import ServiceRuntime
import EntitlementModel
import Foundation

/// The app routes of purchases: receipts, entitlements, transactions, consumables and orders. Registered under
/// `/v1`, whose middleware lets in app and admin keys.
@Loop
struct PurchaseRoutes {
    let db: PostgresPool
    let receipts: ReceiptService
    let reader: EntitlementReader
    let ledger: ConsumableLedger
    let orders: OrderStore
    let catalog: CatalogCache
    /// Answers of entitlement reads at the present time.
    let cache: EntitlementCache
    /// `APPLE_BUNDLE_ID`: a receipt that reads as another app's is refused before it is stored or sent to Apple.
    let bundleID: String?

    func register(on v1: RouterGroup) {
        v1.post("/receipts") { try await postReceipt($0, $1) }
        v1.get("/receipts/{verification_id}") { try await getReceipt($0, $1) }
        v1.add("GET", "/users/{user_id}/entitlements", name: nil, answering: { try entitlements($0, $1) })
        v1.get("/users/{user_id}/transactions") { try await transactions($0, $1) }
        v1.post("/users/{user_id}/consumables/{currency}/consume") { try await consume($0, $1) }
        v1.post("/orders") { request, _ in try await createOrder(request) }
        v1.get("/orders/{order_id}") { try await getOrder($0, $1) }
    }

    private struct ReceiptBody: Decodable {
        var userID: String
        var receiptData: String
        var orderID: String?
        enum CodingKeys: String, CodingKey { case userID = "user_id", receiptData = "receipt_data", orderID = "order_id" }
    }

    private func postReceipt(_ request: HTTPRequest, _ context: HTTPRequestContext) async throws -> HTTPResponse {
        let caller = try context.caller
        let waitMs = try InputRules.queryInt(request, "wait_ms", in: 0...30_000, default: 10_000)
        let body = try request.decodeJSON(ReceiptBody.self)
        let userID = try InputRules.userID(body.userID)
        let orderID = try body.orderID.map { try InputRules.uuid($0, field: "order_id") }
        let bytes = try InputRules.receiptBytes(body.receiptData)
        if let detail = LocalReceipt.rejection(bytes, expectedBundleID: bundleID) {
            throw ProblemError(status: 422, title: "Receipt rejected", detail: detail, extra: ["field": "receipt_data"])
        }
        let (verificationID, outcome) = try await receipts.submit(
            userID: userID, receiptData: body.receiptData, orderID: orderID, waitMs: waitMs, actor: caller.keyID)
        let id = verificationID.lowercasedString
        switch outcome {
        case nil, .pending?:
            return .json(["verification_id": id, "status": SubmissionStatus.pending.rawValue] as [String: String], status: 202)
        case .verified(let environment, _, let transferredFrom)?:
            let document = try await reader.document(userID: userID, at: Date())
            return .json(VerifiedReceiptBody(document: document, verificationID: id, environment: environment,
                                             transferredFrom: transferredFrom.first))
        case .rejected(let appleStatus, let detail)?:
            throw ProblemError(status: 422, title: "Receipt rejected", detail: detail, extra: Self.problemFields(id, appleStatus))
        case .conflict(let originalTransactionID)?:
            throw ProblemError.ownershipConflict(originalTransactionID, source: " in this receipt", outcome: "nothing was moved",
                                                 extra: Self.problemFields(id, nil))
        case .configurationError(let appleStatus, _)?:
            throw ProblemError(status: 502, title: "App Store configuration error",
                               detail: "The App Store refused the service's configuration (shared secret or request); the receipt is stored and will be retried.",
                               extra: Self.problemFields(id, appleStatus))
        }
    }

    /// The members every receipt problem carries: the submission's id, and Apple's status when it answered.
    private static func problemFields(_ verificationID: String, _ appleStatus: Int?) -> [String: JSONValue] {
        var fields: [String: JSONValue] = ["verification_id": .string(verificationID)]
        if let appleStatus { fields["apple_status"] = .int(appleStatus) }
        return fields
    }

    private func getReceipt(_ request: HTTPRequest, _ context: HTTPRequestContext) async throws -> HTTPResponse {
        let missing = ResourceID.notFound("receipt submission", field: "verification_id")
        let id = try ResourceID.named("verification_id", in: context.parameters, missing: missing)
        guard let submission = try await receipts.submissions.find(id, on: db) else { throw missing }
        return .json(SubmissionBody(submission))
    }

    /// At the present time (no `at`) through the cache, filled under a ticket and kept until the report's
    /// `nextChange`; with `at`, always from the database. A hit answers at once, with no task.
    private func entitlements(_ request: HTTPRequest, _ context: HTTPRequestContext) throws -> HTTPHandlerAnswer {
        let userID = try context.parameters.require("user_id", as: UserID.self).value
        if let at = try InputRules.queryDate(request, "at") {
            return .later { .json(encoded: try await reader.document(userID: userID, at: at).jsonBytes) }
        }
        let now = Date()
        if let body = cache.lookup(userID, now: now) {
            return .now(.json(encoded: body))
        }
        let ticket = cache.ticket(for: userID)
        return .later {
            let (document, nextChange) = try await reader.evaluation(userID: userID, at: now)
            let body = document.jsonBytes
            if let answer = EntitlementsAnswer(body: body, asOf: now) {
                cache.store(answer, validUntil: nextChange, for: ticket)
            }
            return .json(encoded: body)
        }
    }

    private func transactions(_ request: HTTPRequest, _ context: HTTPRequestContext) async throws -> HTTPResponse {
        let userID = try context.parameters.require("user_id", as: UserID.self).value
        let list = try await TransactionStore().list(ownedBy: userID, on: db).map(TransactionBody.init)
        return .json(TransactionListBody(userID: userID, transactions: list))
    }

    private struct ConsumeBody: Decodable {
        var amount: Int
        var idempotencyKey: String
        enum CodingKeys: String, CodingKey { case amount, idempotencyKey = "idempotency_key" }

        /// A spend is at most what one purchase may credit (10^12).
        static let amountRule = "must be an integer from 1 to 1000000000000"

        init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            do {
                amount = try container.decode(Int.self, forKey: .amount)
            } catch where !(error is DecodingError) {
                // Foundation reports a number that is no `Int` (1.5, 2^64) with an error of its own, which would
                // surface as invalid JSON naming no field.
                throw DecodingError.dataCorruptedError(forKey: .amount, in: container, debugDescription: Self.amountRule)
            }
            idempotencyKey = try container.decode(String.self, forKey: .idempotencyKey)
        }
    }

    private func consume(_ request: HTTPRequest, _ context: HTTPRequestContext) async throws -> HTTPResponse {
        let userID = try context.parameters.require("user_id", as: UserID.self).value
        let currency = try context.parameters.require("currency", as: Currency.self).value
        let body = try request.decodeJSON(ConsumeBody.self)
        guard (1...ConsumableCredit.maximum).contains(body.amount) else {
            throw ProblemError.badRequest("'amount' \(ConsumeBody.amountRule).", field: "amount")
        }
        let key = try InputRules.token(body.idempotencyKey, field: "idempotency_key")
        do {
            let balance = try await ledger.consume(userID: userID, currency: currency, amount: body.amount, idempotencyKey: key)
            return .json(ConsumeResult(userID: userID, currency: currency, balance: balance))
        } catch let short as InsufficientBalance {
            throw ProblemError(status: 409, title: "Insufficient balance",
                               detail: "The balance of \(currency) is \(short.balance), less than the \(short.requested) requested.",
                               extra: ["balance": .int(short.balance)])
        } catch let reused as IdempotencyKeyReused {
            throw ProblemError(status: 422, title: "Idempotency key reused",
                               detail: "This 'idempotency_key' already spent \(reused.amount), not \(body.amount): nothing was spent. Use a new key for a new spend.",
                               extra: ["field": "idempotency_key"])
        }
    }

    private struct OrderBody: Decodable {
        var userID: String
        var productID: String
        enum CodingKeys: String, CodingKey { case userID = "user_id", productID = "product_id" }
    }

    private func createOrder(_ request: HTTPRequest) async throws -> HTTPResponse {
        let body = try request.decodeJSON(OrderBody.self)
        let userID = try InputRules.userID(body.userID)
        let productID = try InputRules.token(body.productID, field: "product_id", maxLength: 255)
        guard try await catalog.current().product(productID) != nil else {
            throw ProblemError(status: 422, detail: "The catalog has no product '\(productID)'.", extra: ["field": "product_id"])
        }
        return .json(try await orders.create(userID: userID, productID: productID, on: db), status: 201)
    }

    private func getOrder(_ request: HTTPRequest, _ context: HTTPRequestContext) async throws -> HTTPResponse {
        let missing = ResourceID.notFound("order", field: "order_id")
        let id = try ResourceID.named("order_id", in: context.parameters, missing: missing)
        guard let order = try await orders.find(id, on: db) else { throw missing }
        return .json(order)
    }
}
