import AppStore
import ServiceRuntime
import EntitlementModel
import Foundation

/// The app routes of StoreKit 2: signed transactions verified offline and recorded, users' app account
/// tokens, and the catalog as a client asks StoreKit for products. Registered under `/v1`, whose middleware lets
/// in app and admin keys.
@Loop
struct StoreKitRoutes {
    let db: PostgresPool
    let signatures: SignedDataVerifier
    let recorder: PurchaseRecorder
    let reader: EntitlementReader
    let catalog: CatalogCache

    /// At most this many signed transactions in one post (a restore posts all current entitlements at once).
    static let maxTransactions = 100

    func register(on v1: RouterGroup) {
        v1.post("/transactions") { try await postTransactions($0, $1) }
        v1.get("/users/{user_id}/app-account-token") { _, context in try await appAccountToken(context) }
        v1.get("/products") { _, _ in .json(ClientCatalogBody(catalog: try await catalog.current())) }
    }

    private struct TransactionsBody: Decodable {
        var userID: String
        var signedTransaction: String?
        var signedTransactions: [String]?
        var orderID: String?
        enum CodingKeys: String, CodingKey {
            case userID = "user_id", signedTransaction = "signed_transaction", signedTransactions = "signed_transactions", orderID = "order_id"
        }
    }

    /// `POST /v1/transactions`: every JWS verified before anything is recorded, then all recorded in one
    /// database transaction exactly as a verified receipt's transactions are.
    /// How a post names its JWS at `index` of a list (nil: the single `signed_transaction`).
    private static func fieldName(index: Int?) -> String {
        index.map { "signed_transactions[\($0)]" } ?? "signed_transaction"
    }

    private func postTransactions(_ request: HTTPRequest, _ context: HTTPRequestContext) async throws -> HTTPResponse {
        let caller = try context.caller
        let body = try request.decodeJSON(TransactionsBody.self)
        let userID = try InputRules.userID(body.userID)
        let orderID = try body.orderID.map { try InputRules.uuid($0, field: "order_id") }
        // Each JWS with, in a list, its position (a 422 names `signed_transaction`, as API.md promises for either
        // form, and adds `index` for a list's element).
        let posted: [(jws: String, index: Int?)]
        switch (body.signedTransaction, body.signedTransactions) {
        case (let one?, nil):
            posted = [(one, nil)]
        case (nil, let list?):
            guard (1...Self.maxTransactions).contains(list.count) else {
                throw ProblemError.badRequest("'signed_transactions' must hold 1 to \(Self.maxTransactions) signed transactions.",
                                              field: "signed_transactions")
            }
            posted = list.enumerated().map { ($1, $0) }
        case (_?, _?):
            throw ProblemError.badRequest("Give 'signed_transaction' or 'signed_transactions', not both.", field: "signed_transactions")
        case (nil, nil):
            throw ProblemError.badRequest("The field 'signed_transaction' (or 'signed_transactions') is missing.", field: "signed_transaction")
        }

        var verified: [VerifiedSignedData<AppStoreTransactionV2>] = []
        for (jws, index) in posted {
            let name = Self.fieldName(index: index)
            do {
                verified.append(try await signatures.verifyTransaction(jws))
            } catch {
                Log.warning("signed_transaction_refused", ["field": name, "status": error.status.rawValue,
                                                           "reason": error.reason])
                throw Self.rejected("'\(name)' is not a transaction signed by the App Store for this app: \(error.reason).", index: index)
            }
        }
        let environment = verified[0].environment.recorded
        if let index = verified.firstIndex(where: { $0.environment.recorded != environment }) {
            throw Self.rejected("The signed transactions of one post must share one environment; '\(Self.fieldName(index: index))' does not.",
                                index: posted[index].index)
        }
        let transactions = Self.newestStatements(verified.map { $0.environment.recorded($0.payload.transaction) })
        let recorded: RecordedPurchases
        do {
            recorded = try await recorder.record(
                transactions: transactions, renewals: [], latestReceipt: nil, appleStatus: 0, environment: environment,
                context: .init(poster: userID, movesOwnership: true, actor: caller.keyID, claim: nil, orderID: orderID))
        } catch let conflict as OwnershipConflict {
            throw ProblemError.ownershipConflict(conflict.originalTransactionID, outcome: "nothing was recorded")
        }
        Log.info("signed_transactions_recorded", ["user_id": userID, "environment": environment.rawValue,
                                                  "transactions": transactions.count, "new_transactions": recorded.newTransactions])
        let document = try await reader.document(userID: userID, at: Date())
        let ids = verified.map { $0.environment.recordedID($0.payload.transaction.transactionID) }
        return .json(RecordedTransactionsBody(document: document, transactionIDs: body.signedTransactions == nil ? nil : ids,
                                              transactionID: body.signedTransactions == nil ? ids.first : nil,
                                              environment: environment, transferredFrom: recorded.transferredFrom.first))
    }

    /// The 422 refusing a post, naming `signed_transaction` and, for an element of a list, its `index`.
    private static func rejected(_ detail: String, index: Int?) -> ProblemError {
        var extra: [String: JSONValue] = ["field": "signed_transaction"]
        extra["index"] = index.map { .int($0) }
        return ProblemError(status: 422, title: "Signed transaction rejected", detail: detail, extra: extra)
    }

    /// One statement per transaction: where a post repeats a transaction, its newest signed statement.
    static func newestStatements(_ transactions: [StoreTransaction]) -> [StoreTransaction] {
        var newest: [String: StoreTransaction] = [:]
        for transaction in transactions {
            if let known = newest[transaction.transactionID], (known.signedDate ?? .distantPast) >= (transaction.signedDate ?? .distantPast) { continue }
            newest[transaction.transactionID] = transaction
        }
        return newest.values.sorted { $0.wasBought(before: $1) }
    }

    /// `GET /v1/users/{user_id}/app-account-token`: the user's stable token, created on first use.
    private func appAccountToken(_ context: HTTPRequestContext) async throws -> HTTPResponse {
        let userID = try context.parameters.require("user_id", as: UserID.self).value
        let token = try await AppAccountTokenStore().token(for: userID, on: db)
        return .json(["user_id": userID, "app_account_token": token.lowercasedString])
    }
}

/// The 200 answer to `POST /v1/transactions`: the user's entitlements plus what was recorded.
struct RecordedTransactionsBody: Encodable {
    var document: EntitlementsDocument
    /// For a list (`signed_transactions`): the ids in the order posted.
    var transactionIDs: [String]?
    /// For one (`signed_transaction`).
    var transactionID: String?
    var environment: StoreEnvironment
    /// The previous owner when the purchase moved to this user (`RESTORE_POLICY=transfer`).
    var transferredFrom: String?

    enum CodingKeys: String, CodingKey {
        case transactionID = "transaction_id", transactionIDs = "transaction_ids", environment, transferredFrom = "transferred_from"
    }

    func encode(to encoder: any Encoder) throws {
        try document.encode(to: encoder)
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encodeIfPresent(transactionID, forKey: .transactionID)
        try container.encodeIfPresent(transactionIDs, forKey: .transactionIDs)
        try container.encode(environment.rawValue, forKey: .environment)
        try container.encodeIfPresent(transferredFrom, forKey: .transferredFrom)
    }
}

/// `GET /v1/products`: each product as a client needs it to ask StoreKit for it (no prices: the App Store
/// localises them).
struct ClientCatalogBody: Encodable {
    var catalog: Catalog

    private struct Entry: Encodable {
        var product: Product
        enum CodingKeys: String, CodingKey {
            case productID = "product_id", type, entitlements, subscriptionGroup = "subscription_group", duration, currency, amount
        }

        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(product.productID, forKey: .productID)
            try container.encode(product.type.rawValue, forKey: .type)
            try container.encode(product.entitlements, forKey: .entitlements)
            try container.encodeIfPresent(product.subscriptionGroup, forKey: .subscriptionGroup)
            try container.encodeIfPresent(product.duration?.description, forKey: .duration)
            try container.encodeIfPresent(product.currency, forKey: .currency)
            try container.encodeIfPresent(product.amount, forKey: .amount)
        }
    }

    enum CodingKeys: String, CodingKey { case products }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(catalog.products.map(Entry.init(product:)), forKey: .products)
    }
}
