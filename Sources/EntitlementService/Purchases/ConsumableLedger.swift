import ServiceRuntime
import Foundation
/// The balance was too small for a consume.
struct InsufficientBalance: Error, Sendable {
    var balance: Int
    var requested: Int
}

/// Spending consumables: one ledger entry per idempotency key, the balance row updated (and the webhook event
/// written) in the same transaction, and never below zero by a consume (a refund debit may take it there).
@Loop
struct ConsumableLedger {
    let db: PostgresPool
    let events: EventRecorder

    /// Spends `amount` of `currency`; the same key again spends nothing and answers the current balance.
    func consume(userID: String, currency: String, amount: Int, idempotencyKey: String) async throws -> Int {
        let catalog = try await events.catalog.current()
        do {
            return try await db.transaction { connection in
                let watch = try await events.watch([userID], catalog: catalog, now: Date(), on: connection)
                if try await connection.query("""
                    SELECT 1 FROM consumable_ledger WHERE user_id = $1 AND currency = $2 AND idempotency_key = $3
                    """, [userID, currency, idempotencyKey]).rows.first != nil {
                    return try await balance(userID: userID, currency: currency, on: connection)
                }
                let spent = try await connection.query("""
                    UPDATE consumable_balances SET balance = balance - $3
                     WHERE user_id = $1 AND currency = $2 AND balance >= $3
                    RETURNING balance
                    """, [userID, currency, amount])
                guard let row = spent.rows.first else {
                    throw InsufficientBalance(balance: try await balance(userID: userID, currency: currency, on: connection), requested: amount)
                }
                _ = try await connection.query("""
                    INSERT INTO consumable_ledger (user_id, currency, amount, kind, idempotency_key)
                    VALUES ($1, $2, $3, 'consume', $4)
                    """, [userID, currency, -amount, idempotencyKey])
                try await events.finish(watch, cause: { _ in .consumableSpent(currency: currency) }, on: connection)
                return try row.int("balance")
            }
        } catch let error as PostgresError where error.isUniqueViolation {
            // The same key raced us and won: it spent once, so we spend nothing.
            return try await db.withConnection { try await balance(userID: userID, currency: currency, on: $0) }
        }
    }

    private func balance(userID: String, currency: String, on connection: PostgresConnection) async throws -> Int {
        try await connection.query("SELECT balance FROM consumable_balances WHERE user_id = $1 AND currency = $2", [userID, currency])
            .rows.first.map { try $0.int("balance") } ?? 0
    }
}
