import Foundation
import Testing
@testable import EntitlementService
@testable import ServiceRuntime

/// The triggers of `migrations/0003_change_notifications.sql`: every write that may change a user's
/// entitlements announces that user on commit, once, and nothing on rollback.
@Suite struct ChangeNotificationTests {
    /// A write and the users it must announce. `setup` is committed (and its announcements dropped) first.
    struct Case: CustomStringConvertible {
        var description: String
        var setup: [String] = []
        var change: [String]
        var announced: [String]
    }

    /// One case per table and kind of write; `{A}`, `{B}` and `{P}` stand for fresh user ids and a purchase id.
    static let cases: [Case] = [
        Case(description: "purchase_owners insert", change: ["INSERT INTO purchase_owners VALUES ('{P}', '{A}')"], announced: ["A"]),
        Case(description: "purchase_owners transfer", setup: ["INSERT INTO purchase_owners VALUES ('{P}', '{A}')"],
             change: ["UPDATE purchase_owners SET user_id = '{B}' WHERE original_transaction_id = '{P}'"], announced: ["A", "B"]),
        Case(description: "purchase_owners delete", setup: ["INSERT INTO purchase_owners VALUES ('{P}', '{A}')"],
             change: ["DELETE FROM purchase_owners WHERE original_transaction_id = '{P}'"], announced: ["A"]),
        Case(description: "app_store_transactions insert, two rows of one owner", setup: ["INSERT INTO purchase_owners VALUES ('{P}', '{A}')"],
             change: ["""
                INSERT INTO app_store_transactions (transaction_id, original_transaction_id, product_id, environment, purchase_date)
                VALUES ('{P}', '{P}', 'com.example.premium', 'Production', now()), ('{P}.2', '{P}', 'com.example.premium', 'Production', now())
                """], announced: ["A"]),
        Case(description: "app_store_transactions insert without an owner",
             change: ["INSERT INTO app_store_transactions (transaction_id, original_transaction_id, product_id, environment, purchase_date) VALUES ('{P}', '{P}', 'x', 'Sandbox', now())"],
             announced: []),
        Case(description: "app_store_transactions update (refund)", setup: [
            "INSERT INTO purchase_owners VALUES ('{P}', '{A}')",
            "INSERT INTO app_store_transactions (transaction_id, original_transaction_id, product_id, environment, purchase_date) VALUES ('{P}', '{P}', 'x', 'Sandbox', now())",
        ], change: ["UPDATE app_store_transactions SET cancellation_date = now() WHERE transaction_id = '{P}'"], announced: ["A"]),
        Case(description: "app_store_transactions delete", setup: [
            "INSERT INTO purchase_owners VALUES ('{P}', '{A}')",
            "INSERT INTO app_store_transactions (transaction_id, original_transaction_id, product_id, environment, purchase_date) VALUES ('{P}', '{P}', 'x', 'Sandbox', now())",
        ], change: ["DELETE FROM app_store_transactions WHERE transaction_id = '{P}'"], announced: ["A"]),
        Case(description: "subscriptions insert", setup: ["INSERT INTO purchase_owners VALUES ('{P}', '{A}')"],
             change: ["INSERT INTO subscriptions (original_transaction_id, product_id, environment) VALUES ('{P}', 'x', 'Production')"], announced: ["A"]),
        Case(description: "subscriptions update", setup: [
            "INSERT INTO purchase_owners VALUES ('{P}', '{A}')",
            "INSERT INTO subscriptions (original_transaction_id, product_id, environment) VALUES ('{P}', 'x', 'Production')",
        ], change: ["UPDATE subscriptions SET will_renew = true WHERE original_transaction_id = '{P}'"], announced: ["A"]),
        Case(description: "subscriptions delete", setup: [
            "INSERT INTO purchase_owners VALUES ('{P}', '{A}')",
            "INSERT INTO subscriptions (original_transaction_id, product_id, environment) VALUES ('{P}', 'x', 'Production')",
        ], change: ["DELETE FROM subscriptions WHERE original_transaction_id = '{P}'"], announced: ["A"]),
        Case(description: "grants insert, two users in one statement", change: ["""
            INSERT INTO grants (user_id, entitlement, reason, created_by)
            VALUES ('{A}', 'premium', 'r', 'k'), ('{A}', 'pro', 'r', 'k'), ('{B}', 'premium', 'r', 'k')
            """], announced: ["A", "B"]),
        Case(description: "grants revoke", setup: ["INSERT INTO grants (user_id, entitlement, reason, created_by) VALUES ('{A}', 'premium', 'r', 'k')"],
             change: ["UPDATE grants SET revoked_at = now() WHERE user_id = '{A}'"], announced: ["A"]),
        Case(description: "grants delete", setup: ["INSERT INTO grants (user_id, entitlement, reason, created_by) VALUES ('{A}', 'premium', 'r', 'k')"],
             change: ["DELETE FROM grants WHERE user_id = '{A}'"], announced: ["A"]),
        Case(description: "consumable_balances insert", change: ["INSERT INTO consumable_balances VALUES ('{A}', 'coins', 100)"], announced: ["A"]),
        Case(description: "consumable_balances update", setup: ["INSERT INTO consumable_balances VALUES ('{A}', 'coins', 100)"],
             change: ["UPDATE consumable_balances SET balance = balance - 1 WHERE user_id = '{A}'"], announced: ["A"]),
        Case(description: "consumable_balances delete", setup: ["INSERT INTO consumable_balances VALUES ('{A}', 'coins', 100)"],
             change: ["DELETE FROM consumable_balances WHERE user_id = '{A}'"], announced: ["A"]),
        Case(description: "one user in several statements and tables of one transaction", change: [
            "INSERT INTO grants (user_id, entitlement, reason, created_by) VALUES ('{A}', 'premium', 'r', 'k')",
            "INSERT INTO consumable_balances VALUES ('{A}', 'coins', 1)",
            "UPDATE consumable_balances SET balance = 2 WHERE user_id = '{A}'",
            "INSERT INTO purchase_owners VALUES ('{P}', '{A}')",
        ], announced: ["A"]),
        Case(description: "products insert", change: ["INSERT INTO products (product_id, type) VALUES ('{P}', 'non_consumable')"], announced: [""]),
        Case(description: "products update", setup: ["INSERT INTO products (product_id, type) VALUES ('{P}', 'non_consumable')"],
             change: ["UPDATE products SET entitlements = '{pro}' WHERE product_id = '{P}'"], announced: [""]),
        Case(description: "products delete", setup: ["INSERT INTO products (product_id, type) VALUES ('{P}', 'non_consumable')"],
             change: ["DELETE FROM products WHERE product_id = '{P}'"], announced: [""]),
        Case(description: "grants truncate", change: ["TRUNCATE grants"], announced: [""]),
        Case(description: "a statement that changes no row", change: ["UPDATE grants SET reason = 'x' WHERE false"], announced: []),
    ]

    /// `sql` with the placeholders replaced by this run's names.
    static func fill(_ sql: String, _ names: [String: String]) -> String {
        names.reduce(sql) { $0.replacingOccurrences(of: "{\($1.key)}", with: $1.value) }
    }

    @Test @Loop func everyWriteAnnouncesItsUsersOnceOnCommitAndNothingOnRollback() async throws {
        try await TestDatabase.withMigratedDatabase { url, pool in
            let announcements = try await Announcements.listen(url)
            defer { announcements.close() }
            for test in Self.cases {
                for commits in [false, true] {
                    let names = ["A": "a-" + randomToken(), "B": "b-" + randomToken(), "P": "p-" + randomToken()]
                    for sql in test.setup { _ = try await pool.query(Self.fill(sql, names), []) }
                    _ = try await announcements.collected()
                    do {
                        try await pool.transaction { connection in
                            for sql in test.change { _ = try await connection.query(Self.fill(sql, names), []) }
                            #expect(try await announcements.collected() == [], "\(test): announced before the commit")
                            if !commits { throw CancellationError() }
                        }
                    } catch is CancellationError {}
                    let expected = commits ? test.announced.map { names[$0] ?? $0 }.sorted() : []
                    #expect(try await announcements.collected().sorted() == expected, "\(test), \(commits ? "committed" : "rolled back")")
                }
            }
        }
    }
}
