import ServiceRuntime
import Foundation

/// What support may have in hand to find a customer by, besides the user id: a purchase's original
/// transaction id, any of its transaction ids, a server order id (`POST /v1/orders`), or an app account token
/// this service issued.
enum CustomerKey: Equatable, Sendable {
    case originalTransactionID(String)
    case transactionID(String)
    case orderID(UUID)
    case appAccountToken(UUID)

    /// The query parameters, in the order a problem lists them.
    static let fields = ["original_transaction_id", "transaction_id", "order_id", "app_account_token"]

    /// The query parameter this key came in.
    var field: String {
        switch self {
        case .originalTransactionID: "original_transaction_id"
        case .transactionID: "transaction_id"
        case .orderID: "order_id"
        case .appAccountToken: "app_account_token"
        }
    }

    /// Exactly one of ``fields`` from `query`: transaction ids are 1–64 printable ASCII characters without
    /// spaces, order ids and tokens UUIDs. Anything else is a 400 problem naming the field.
    init(query: [String: String]) throws {
        let given = Self.fields.filter { query[$0] != nil }
        guard given.count == 1, let field = given.first, let value = query[field] else {
            throw ProblemError.badRequest("Give exactly one of " + Self.fields.joined(separator: ", ") + ".",
                                          field: given.dropFirst().first ?? Self.fields[0])
        }
        switch field {
        case "original_transaction_id", "transaction_id":
            guard (1...64).contains(value.utf8.count), value.utf8.allSatisfy({ (0x21...0x7E).contains($0) }) else {
                throw ProblemError.badRequest("'\(field)' must be 1 to 64 printable ASCII characters without spaces.", field: field)
            }
            self = field == "transaction_id" ? .transactionID(value) : .originalTransactionID(value)
        default:
            let uuid = try InputRules.uuid(value, field: field)
            self = field == "order_id" ? .orderID(uuid) : .appAccountToken(uuid)
        }
    }
}

/// Finds the user a ``CustomerKey`` belongs to, each kind by a primary or unique key: the purchase's owner
/// (`purchase_owners`, through `app_store_transactions` for a transaction id), the order's user, or the token's.
@Loop
struct CustomerLookup {
    /// The pool (or, in a test, a stand-in that explains the statements).
    let db: any PostgresQueryable

    /// The user `key` belongs to; nil when no stored purchase, order or token has it (or the purchase has no
    /// owner yet).
    func user(_ key: CustomerKey) async throws -> String? {
        switch key {
        case .originalTransactionID(let id): try await OwnerStore().owners(of: [id], on: db)[id]
        case .transactionID(let id): try await OwnerStore().owner(ofTransaction: id, on: db)
        case .orderID(let id): try await OrderStore().find(id, on: db)?.userID
        case .appAccountToken(let token): try await AppAccountTokenStore().users(of: [token], on: db)[token]
        }
    }
}
