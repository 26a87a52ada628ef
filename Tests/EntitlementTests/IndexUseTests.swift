import Foundation
import Testing
@testable import EntitlementService
@testable import ServiceRuntime

/// The look-ups by `app_account_token`, by `verification_id` and the console's look-ups of a customer use their indexes: the stores' own statements,
/// with their own binds, are explained (not run) against tables populated enough that a sequential scan would
/// be the planner's choice for anything but an indexed comparison.
@Suite(.serialized, .timeLimit(.minutes(2)))
@Loop
struct IndexUseTests {
    /// Stands in for the database a store runs a statement on: it explains the statement with its parameters
    /// (`EXPLAIN (FORMAT JSON)`, nothing is executed), keeps the plan, and answers with no rows.
    final class Explaining: PostgresQueryable {
        let pool: PostgresPool
        private(set) var plans: [JSONValue] = []

        init(_ pool: PostgresPool) { self.pool = pool }

        func query(_ sql: String, _ parameters: [any PostgresEncodable]) async throws -> PostgresResult {
            let text = try await pool.query("EXPLAIN (FORMAT JSON) " + sql, parameters).single().string("QUERY PLAN")
            plans.append(try JSONDecoder().decode(JSONValue.self, from: Data(text.utf8)))
            return .empty(command: "EXPLAIN")
        }

        /// The index scans of the plan explained last, as "node type on index name".
        func indexScans() -> [String] {
            var scans: [String] = []
            func visit(_ value: JSONValue) {
                switch value {
                case .object(let node):
                    if case .string(let type)? = node["Node Type"], type.contains("Index"), case .string(let index)? = node["Index Name"] {
                        scans.append("\(type) on \(index)")
                    }
                    node.values.forEach(visit)
                case .array(let items):
                    items.forEach(visit)
                default:
                    break
                }
            }
            plans.last.map(visit)
            return scans
        }
    }

    /// 20 000 orders, 20 000 users' app account tokens, and 20 000 submissions of which half are still in
    /// flight, analysed.
    private func populate(_ stack: PurchaseStack) async throws {
        _ = try await stack.sql("""
            INSERT INTO orders (user_id, product_id) SELECT 'user-' || n, 'com.example.lifetime' FROM generate_series(1, 20000) AS n
            """)
        _ = try await stack.sql("INSERT INTO app_account_tokens (user_id) SELECT 'user-' || n FROM generate_series(1, 20000) AS n")
        _ = try await stack.sql("ANALYZE app_account_tokens")
        _ = try await stack.sql("""
            INSERT INTO receipt_submissions (user_id, receipt_data, receipt_sha256, status)
            SELECT 'user-' || n, 'receipt-' || n, sha256(('receipt-' || n)::bytea), CASE WHEN n % 2 = 0 THEN 'verified' ELSE 'pending' END
              FROM generate_series(1, 20000) AS n
            """)
        _ = try await stack.sql("ANALYZE orders")
        _ = try await stack.sql("ANALYZE receipt_submissions")
    }

    @Test func tokenLookUpsUseTheTokenIndex() async throws {
        try await PurchaseStack.run { stack in
            try await populate(stack)
            let tokens = try await stack.sql("SELECT app_account_token FROM orders ORDER BY order_id LIMIT 3").map { try $0.uuid("app_account_token") }
            let explaining = Explaining(stack.pool)
            let orders = OrderStore()

            _ = try await AppAccountTokenStore().users(of: Set(tokens), on: explaining)
            #expect(explaining.indexScans().contains { $0.hasSuffix(" on orders_app_account_token_key") }, "\(explaining.plans.last.map(\.jsonText) ?? "")")
            #expect(explaining.indexScans().contains { $0.hasSuffix(" on app_account_tokens_app_account_token_key") },
                    "\(explaining.plans.last.map(\.jsonText) ?? "")")
            try await orders.fulfil(token: tokens[0], candidates: [("1000000001", "com.example.lifetime")], on: explaining)
            #expect(explaining.indexScans().contains { $0.hasSuffix(" on orders_app_account_token_key") }, "\(explaining.plans.last.map(\.jsonText) ?? "")")
            _ = try await orders.orderTokens(among: Set(tokens), on: explaining)
            #expect(explaining.indexScans().contains { $0.hasSuffix(" on orders_app_account_token_key") }, "\(explaining.plans.last.map(\.jsonText) ?? "")")

            // The check can fail: comparing the token as text, as the service once did, scans the table.
            _ = try await explaining.query("SELECT user_id FROM orders WHERE app_account_token::text = $1", [tokens[0].lowercasedString])
            #expect(!explaining.indexScans().contains { $0.hasSuffix(" on orders_app_account_token_key") })
        }
    }

    @Test func verificationIDLookUpsUseThePrimaryKey() async throws {
        try await PurchaseStack.run { stack in
            try await populate(stack)
            let id = try #require(try await stack.sql("SELECT verification_id FROM receipt_submissions WHERE status = 'pending' LIMIT 1").first?.uuid("verification_id"))
            let explaining = Explaining(stack.pool)
            let submissions = SubmissionStore()
            let claim = SubmissionClaim(verificationID: id, claimID: UUID())

            _ = try await submissions.find(id, on: explaining)
            #expect(explaining.indexScans().contains { $0.hasSuffix(" on receipt_submissions_pkey") }, "\(explaining.plans.last.map(\.jsonText) ?? "")")
            _ = try await submissions.claim(id, lease: .seconds(30), on: explaining)
            #expect(explaining.indexScans().contains { $0.hasSuffix(" on receipt_submissions_pkey") }, "\(explaining.plans.last.map(\.jsonText) ?? "")")
            _ = try await submissions.lockForRecording(claim, on: explaining)
            #expect(explaining.indexScans().contains { $0.hasSuffix(" on receipt_submissions_pkey") }, "\(explaining.plans.last.map(\.jsonText) ?? "")")
            try await submissions.release([claim], on: explaining)
            #expect(explaining.indexScans().contains { $0.hasSuffix(" on receipt_submissions_pkey") }, "\(explaining.plans.last.map(\.jsonText) ?? "")")

            _ = try await explaining.query("SELECT status FROM receipt_submissions WHERE verification_id::text = $1", [id.lowercasedString])
            #expect(!explaining.indexScans().contains { $0.hasSuffix(" on receipt_submissions_pkey") })
        }
    }

    /// `GET /v1/admin/lookup`'s statements, on 20 000 transactions of 10 000 owned purchases: each kind of key is
    /// a primary or unique key look-up (a transaction id through its purchase's owner).
    @Test func customerLookUpsUseTheirKeys() async throws {
        try await PurchaseStack.run { stack in
            try await populate(stack)
            _ = try await stack.sql("""
                INSERT INTO app_store_transactions (transaction_id, original_transaction_id, product_id, environment, purchase_date)
                SELECT (2000000000 + n)::text, (1000000000 + n / 2)::text, 'com.example.premium.monthly', 'Production', now()
                  FROM generate_series(1, 20000) AS n
                """)
            _ = try await stack.sql("""
                INSERT INTO purchase_owners (original_transaction_id, user_id)
                SELECT DISTINCT original_transaction_id, 'user-' || original_transaction_id FROM app_store_transactions
                """)
            _ = try await stack.sql("ANALYZE app_store_transactions")
            _ = try await stack.sql("ANALYZE purchase_owners")
            let order = try #require(try await stack.sql("SELECT order_id, app_account_token FROM orders LIMIT 1").first)
            let explaining = Explaining(stack.pool)
            let lookup = CustomerLookup(db: explaining)
            let plan = { explaining.plans.last.map(\.jsonText) ?? "" }

            _ = try await lookup.user(.originalTransactionID("1000000005"))
            #expect(explaining.indexScans().contains { $0.hasSuffix(" on purchase_owners_pkey") }, "\(plan())")
            _ = try await lookup.user(.transactionID("2000000010"))
            #expect(explaining.indexScans().contains { $0.hasSuffix(" on app_store_transactions_pkey") }, "\(plan())")
            #expect(explaining.indexScans().contains { $0.hasSuffix(" on purchase_owners_pkey") }, "\(plan())")
            _ = try await lookup.user(.orderID(try order.uuid("order_id")))
            #expect(explaining.indexScans().contains { $0.hasSuffix(" on orders_pkey") }, "\(plan())")
            _ = try await lookup.user(.appAccountToken(try order.uuid("app_account_token")))
            #expect(explaining.indexScans().contains { $0.hasSuffix(" on orders_app_account_token_key") }, "\(plan())")

            // The check can fail: the owner by user id's prefix is no key look-up.
            _ = try await explaining.query("SELECT user_id FROM purchase_owners WHERE user_id LIKE $1", ["%-1000000005"])
            #expect(!explaining.indexScans().contains { $0.hasSuffix(" on purchase_owners_pkey") })
        }
    }
}
