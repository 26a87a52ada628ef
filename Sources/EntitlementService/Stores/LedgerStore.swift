import EntitlementModel
import ServiceRuntime

/// The balance was too small for a consume.
struct InsufficientBalance: Error, Sendable {
    var balance: Int
    var requested: Int
}

/// A consume's idempotency key was already used for a spend of another amount: nothing spent.
struct IdempotencyKeyReused: Error, Sendable {
    /// The amount the key first spent.
    var amount: Int
}

/// A consumable purchase's credit: `amount` of `currency` for the owner of `originalTransactionID`.
struct ConsumableCredit: Sendable {
    /// The largest credit one transaction may make (a catalog's largest amount, far beyond any real amount times a
    /// quantity a store sells): balances then stay far from the 64-bit limit.
    static let maximum = Product.maximumAmount

    var transactionID: String
    var originalTransactionID: String
    var currency: String
    var amount: Int
}

/// The `consumable_ledger` and `consumable_balances` tables: a credit once per transaction, a refund debit and
/// its reversal once per refund cycle of the transaction (migration 0008), a consume once per idempotency key,
/// each entry's balance row updated in the same transaction, and never below zero by a consume (a refund debit
/// may take it there). The stored transaction decides a credit, a refund or a reversal (see `TransactionStore`), not
/// the receipt at hand.
@Loop
struct LedgerStore {
    /// Credits each purchase not refunded to its owner, once per transaction (balance rows in key order).
    func credit(_ credits: [ConsumableCredit], on db: some PostgresQueryable) async throws {
        guard !credits.isEmpty else { return }
        _ = try await db.query("""
            WITH entry AS (
                    INSERT INTO consumable_ledger (user_id, currency, amount, kind, transaction_id, cycle)
                    SELECT o.user_id, x.currency, x.amount, 'credit', x.transaction_id, 1
                      FROM unnest($1, $2, $3, $4) AS x (transaction_id, original_transaction_id, currency, amount)
                      JOIN purchase_owners o ON o.original_transaction_id = x.original_transaction_id
                      JOIN app_store_transactions t ON t.transaction_id = x.transaction_id AND t.cancellation_date IS NULL
                    ON CONFLICT (transaction_id, kind, cycle) WHERE transaction_id IS NOT NULL DO NOTHING
                    RETURNING user_id, currency, amount)
            INSERT INTO consumable_balances AS b (user_id, currency, balance)
            SELECT user_id, currency, sum(amount) FROM entry GROUP BY user_id, currency ORDER BY user_id, currency
            ON CONFLICT (user_id, currency) DO UPDATE SET balance = b.balance + EXCLUDED.balance
            """, [credits.map(\.transactionID), credits.map(\.originalTransactionID), credits.map(\.currency), credits.map(\.amount)])
    }

    /// Brings each of `transactionIDs`' credit in line with its stored transaction's refund state: a refunded
    /// transaction whose credit stands is debited (`refund`: the share Apple refunded, its `revocation_percentage`,
    /// rounded to the nearest unit; the whole without one), one no longer refunded whose refund debit stands is
    /// credited back what the debit took (`refund_reversal`, Apple reversed the refund), and one still refunded
    /// whose share changed is debited or credited the difference (`refund_adjustment`). Refunds and reversals of a
    /// transaction are numbered (`cycle`, the reversals before it plus one), adjustments apart (the adjustments
    /// before it plus one), each written once per number (a unique key), so a refund → reversal → refund is debited
    /// twice and credited back once, while a statement seen again, or two recordings racing, write nothing more.
    /// Balance rows move with their entries. Returns the transactions whose refund this credited back.
    @discardableResult
    func settleRefunds(_ transactionIDs: [String], on db: some PostgresQueryable) async throws -> Set<String> {
        guard !transactionIDs.isEmpty else { return [] }
        return Set(try await db.query("""
            WITH entry AS (
                    INSERT INTO consumable_ledger (user_id, currency, amount, kind, transaction_id, cycle)
                    SELECT c.user_id, c.currency, g.target - n.outstanding,
                           CASE WHEN NOT s.refunded THEN 'refund_reversal'
                                WHEN n.refunds = n.reversals THEN 'refund' ELSE 'refund_adjustment' END,
                           c.transaction_id,
                           CASE WHEN s.refunded AND n.refunds > n.reversals THEN n.adjustments + 1 ELSE n.reversals + 1 END
                      FROM consumable_ledger c
                      JOIN app_store_transactions t ON t.transaction_id = c.transaction_id
                     CROSS JOIN LATERAL (SELECT t.cancellation_date IS NOT NULL AS refunded) s
                     CROSS JOIN LATERAL (
                           SELECT CASE WHEN s.refunded THEN -((c.amount * coalesce(t.revocation_percentage, 100000) + 50000) / 100000)
                                       ELSE 0 END AS target) g
                     CROSS JOIN LATERAL (
                           SELECT count(*) FILTER (WHERE kind = 'refund') AS refunds,
                                  count(*) FILTER (WHERE kind = 'refund_reversal') AS reversals,
                                  count(*) FILTER (WHERE kind = 'refund_adjustment') AS adjustments,
                                  coalesce(sum(amount), 0) AS outstanding
                             FROM consumable_ledger
                            WHERE transaction_id = c.transaction_id AND kind IN ('refund', 'refund_reversal', 'refund_adjustment')) n
                     WHERE c.transaction_id = ANY($1) AND c.kind = 'credit'
                       AND CASE WHEN s.refunded THEN n.refunds = n.reversals OR n.outstanding <> g.target
                                ELSE n.refunds > n.reversals END
                    ON CONFLICT (transaction_id, kind, cycle) WHERE transaction_id IS NOT NULL DO NOTHING
                    RETURNING user_id, currency, amount, transaction_id, kind),
                 total AS (SELECT user_id, currency, sum(amount) AS amount FROM entry GROUP BY user_id, currency),
                 moved AS (UPDATE consumable_balances b SET balance = b.balance + total.amount
                             FROM total WHERE b.user_id = total.user_id AND b.currency = total.currency)
            SELECT DISTINCT transaction_id FROM entry WHERE kind = 'refund_reversal'
            """, [transactionIDs]).rows.map { try $0.string("transaction_id") })
    }

    /// Spends `amount` of `currency` in the caller's transaction (whose connection is `db`); the same key again
    /// spends nothing and answers the current balance. A concurrent spend with the same key makes the ledger's
    /// insert fail with a unique violation: the caller's transaction then spent nothing.
    /// - Throws: `InsufficientBalance` when the balance is smaller than `amount`; `IdempotencyKeyReused` when the
    ///   key already spent another amount.
    func consume(userID: String, currency: String, amount: Int, idempotencyKey: String, on db: some PostgresQueryable) async throws -> Int {
        if let balance = try await replay(userID: userID, currency: currency, amount: amount, idempotencyKey: idempotencyKey, on: db) {
            return balance
        }
        let spent = try await db.query("""
            UPDATE consumable_balances SET balance = balance - $3
             WHERE user_id = $1 AND currency = $2 AND balance >= $3
            RETURNING balance
            """, [userID, currency, amount])
        guard let row = spent.rows.first else {
            throw InsufficientBalance(balance: try await balance(userID: userID, currency: currency, on: db), requested: amount)
        }
        _ = try await db.query("""
            INSERT INTO consumable_ledger (user_id, currency, amount, kind, idempotency_key)
            VALUES ($1, $2, $3, 'consume', $4)
            """, [userID, currency, -amount, idempotencyKey])
        return try row.int("balance")
    }

    /// For a key that already spent: the current balance, when it spent `amount`; nil when the key is new.
    /// - Throws: `IdempotencyKeyReused` when it spent another amount.
    func replay(userID: String, currency: String, amount: Int, idempotencyKey: String, on db: some PostgresQueryable) async throws -> Int? {
        guard let spent = try await db.query("""
            SELECT -amount AS spent FROM consumable_ledger WHERE user_id = $1 AND currency = $2 AND idempotency_key = $3
            """, [userID, currency, idempotencyKey]).rows.first.map({ try $0.int("spent") }) else { return nil }
        guard spent == amount else { throw IdempotencyKeyReused(amount: spent) }
        return try await balance(userID: userID, currency: currency, on: db)
    }

    /// The balance of `currency` (0 without a row).
    func balance(userID: String, currency: String, on db: some PostgresQueryable) async throws -> Int {
        try await db.query("SELECT balance FROM consumable_balances WHERE user_id = $1 AND currency = $2", [userID, currency])
            .rows.first.map { try $0.int("balance") } ?? 0
    }
}
