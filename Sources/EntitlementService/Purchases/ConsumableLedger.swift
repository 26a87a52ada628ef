import ServiceRuntime
import Foundation

/// Spending consumables: the ledger's spend (``LedgerStore/consume(userID:currency:amount:idempotencyKey:on:)``)
/// and its webhook event in one transaction.
@Loop
struct ConsumableLedger {
    let db: PostgresPool
    let events: EventRecorder
    let ledger = LedgerStore()

    /// Spends `amount` of `currency`; the same key again spends nothing and answers the current balance.
    /// - Throws: `InsufficientBalance` when the balance is short; `IdempotencyKeyReused` when the key spent
    ///   another amount.
    func consume(userID: String, currency: String, amount: Int, idempotencyKey: String) async throws -> Int {
        do {
            return try await db.transaction { connection in
                let watch = try await events.watch([userID], on: connection)
                let balance = try await ledger.consume(userID: userID, currency: currency, amount: amount,
                                                       idempotencyKey: idempotencyKey, on: connection)
                try await events.finish(watch, cause: { _ in .consumableSpent(currency: currency) }, on: connection)
                return balance
            }
        } catch let error as PostgresError where error.isUniqueViolation {
            // The same key raced us and won: it spent once, so we spend nothing (if it spent the same amount).
            guard let balance = try await ledger.replay(userID: userID, currency: currency, amount: amount,
                                                        idempotencyKey: idempotencyKey, on: db) else { throw error }
            return balance
        }
    }
}
