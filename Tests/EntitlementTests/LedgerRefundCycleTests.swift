import EntitlementModel
import Foundation
import Testing
@testable import EntitlementService
@testable import FakeAppStore
@testable import ServiceRuntime

/// A consumable's refunds and their reversals in the ledger, against a migrated database through the recorder:
/// each refund → reversal cycle counts once (migration 0008), a statement delivered twice (or by two recordings at
/// once) counts once, and in any order of delivery the balance follows the newest signed statement.
@Suite(.serialized, .timeLimit(.minutes(3)))
@Loop
struct LedgerRefundCycleTests {
    private static let base = Date(timeIntervalSince1970: 1_800_000_000)

    /// The statements Apple signs about consumable `id` over its life: bought, then refunded and reversed in turn
    /// (`cycles` refunds; `endsRefunded` false adds the last reversal), each signed 10 s after the previous one.
    private static func life(of id: String, cycles: Int, endsRefunded: Bool) -> [StoreTransaction] {
        let steps = 1 + cycles * 2 - (endsRefunded ? 1 : 0)
        return (0..<steps).map { step in
            let signed = base.addingTimeInterval(Double(step) * 10)
            let refunded = step % 2 == 1
            return StoreTransaction(transactionID: id, originalTransactionID: id, productID: "com.example.coins.100", purchaseDate: base,
                                    cancellationDate: refunded ? signed : nil, cancellationReason: refunded ? "0" : nil, signedDate: signed)
        }
    }

    private struct Ledger {
        var entries: [(kind: String, cycle: Int, amount: Int)]
        var balance: Int
        var refunds: [Int] { entries.filter { $0.kind == "refund" }.map(\.cycle) }
        var reversals: [Int] { entries.filter { $0.kind == "refund_reversal" }.map(\.cycle) }
    }

    private func ledger(_ id: String, user: String, on pool: PostgresPool) async throws -> Ledger {
        let entries = try await pool.query("""
            SELECT kind, cycle, amount FROM consumable_ledger WHERE transaction_id = $1 ORDER BY entry_id
            """, [id]).rows.map { (kind: try $0.string("kind"), cycle: try $0.int("cycle"), amount: try $0.int("amount")) }
        return Ledger(entries: entries, balance: try await LedgerStore().balance(userID: user, currency: "coins", on: pool))
    }

    private func withRecorder(_ body: @Loop (PostgresPool, _ record: @escaping @Loop (StoreTransaction, String) async throws -> Void) async throws -> Void) async throws {
        try await TestDatabase.withMigratedDatabase { _, pool in
            let recorder = PurchaseRecorder(db: pool, restorePolicy: .transfer,
                                            events: EventRecorder(catalog: CatalogCache(db: pool), delivers: false))
            try await TestDatabase.storeHarnessCatalog(on: pool)
            try await body(pool) { transaction, user in
                _ = try await recorder.record(transactions: [transaction], renewals: [], latestReceipt: nil, appleStatus: 0, environment: .sandbox,
                                              context: .init(poster: user, movesOwnership: true, actor: "test", claim: nil, orderID: nil))
            }
        }
    }

    @Test func eachRefundAfterAReversalIsDebitedAgainAndEachStatementCountsOnce() async throws {
        try await withRecorder { pool, record in
            let statements = Self.life(of: "cycle-1", cycles: 3, endsRefunded: true)
            var balances: [Int] = []
            for statement in statements {
                try await record(statement, "cycler")
                try await record(statement, "cycler")  // delivered twice
                balances.append(try await ledger("cycle-1", user: "cycler", on: pool).balance)
            }
            #expect(balances == [100, 0, 100, 0, 100, 0])
            var now = try await ledger("cycle-1", user: "cycler", on: pool)
            #expect(now.entries.map(\.kind) == ["credit", "refund", "refund_reversal", "refund", "refund_reversal", "refund"])
            #expect(now.entries.map(\.cycle) == [1, 1, 1, 2, 2, 3])
            #expect(now.entries.map(\.amount) == [100, -100, 100, -100, 100, -100])

            // The last reversal recorded by eight recordings at once: credited back once.
            let reversal = Self.life(of: "cycle-1", cycles: 4, endsRefunded: false).last!
            let racers = (0..<8).map { _ in Task { @Loop in try await record(reversal, "cycler") } }
            for racer in racers { try await racer.value }
            now = try await ledger("cycle-1", user: "cycler", on: pool)
            #expect(now.balance == 100)
            #expect(now.reversals == [1, 2, 3] && now.refunds == [1, 2, 3])

            // Older statements delivered again, and a receipt-like copy of an old refund: nothing changes.
            for statement in statements { try await record(statement, "cycler") }
            var receiptCopy = statements[1]
            receiptCopy.signedDate = nil
            try await record(receiptCopy, "cycler")
            #expect(try await ledger("cycle-1", user: "cycler", on: pool).entries.count == 7)
            #expect(try await ledger("cycle-1", user: "cycler", on: pool).balance == 100)
        }
    }

    /// Every statement of a life delivered twice, in a shuffled order: after each delivery the balance is the sum of
    /// the ledger and holds one refund more than reversals exactly while the stored transaction is refunded and was
    /// credited; at the end the balance is what the newest statement says.
    @Test(arguments: [true, false])
    func shuffledDuplicatedDeliveriesEndAsTheNewestStatementSays(endsRefunded: Bool) async throws {
        try await withRecorder { pool, record in
            for seed in 0..<10 {
                let id = "shuffle-\(endsRefunded)-\(seed)", user = "shuffler-\(seed)"
                var generator = SplitMix64(seed: UInt64(seed))
                let deliveries = (Self.life(of: id, cycles: 3, endsRefunded: endsRefunded) + Self.life(of: id, cycles: 3, endsRefunded: endsRefunded))
                    .shuffled(using: &generator)
                for delivery in deliveries {
                    try await record(delivery, user)
                    let now = try await ledger(id, user: user, on: pool)
                    let refunded = try await pool.query("SELECT cancellation_date IS NOT NULL AS r FROM app_store_transactions WHERE transaction_id = $1",
                                                        [id]).single().bool("r")
                    let credited = now.entries.contains { $0.kind == "credit" }
                    #expect(now.balance == now.entries.map(\.amount).reduce(0, +))
                    #expect(now.refunds.count - now.reversals.count == (refunded && credited ? 1 : 0), "seed \(seed)")
                    #expect(now.refunds == (0..<now.refunds.count).map { $0 + 1 })
                    #expect(now.reversals == Array(now.refunds.prefix(now.reversals.count)))
                }
                #expect(try await ledger(id, user: user, on: pool).balance == (endsRefunded ? 0 : 100), "seed \(seed)")
            }
        }
    }

    /// A partial refund (Apple's `revocationPercentage`: 1 item of 3 is 33,333 thousandths of a percent) debits that
    /// share of the credit, rounded to the nearest unit; its reversal credits back what it debited, and a whole
    /// refund after it the whole credit.
    @Test func aPartialRefundDebitsItsShareAndItsReversalCreditsThatBack() async throws {
        try await withRecorder { pool, record in
            var bought = StoreTransaction(transactionID: "part-1", originalTransactionID: "part-1", productID: "com.example.coins.100",
                                          purchaseDate: Self.base, quantity: 3, signedDate: Self.base)
            try await record(bought, "partial")
            var refunded = bought
            refunded.cancellationDate = Self.base.addingTimeInterval(10)
            refunded.signedDate = Self.base.addingTimeInterval(10)
            refunded.revocationPercentage = 33_333
            try await record(refunded, "partial")
            #expect(try await ledger("part-1", user: "partial", on: pool).balance == 200)
            bought.signedDate = Self.base.addingTimeInterval(20)  // Apple reversed the refund
            try await record(bought, "partial")
            #expect(try await ledger("part-1", user: "partial", on: pool).balance == 300)
            refunded.signedDate = Self.base.addingTimeInterval(30)
            refunded.revocationPercentage = nil  // refunded whole this time
            try await record(refunded, "partial")
            let first = try await ledger("part-1", user: "partial", on: pool)
            #expect(first.entries.map(\.amount) == [300, -100, 100, -300] && first.balance == 0)
            // The share of the refund in force changes: the ledger follows with the difference, once.
            let share = StoreTransaction(transactionID: "part-2", originalTransactionID: "part-2", productID: "com.example.coins.100",
                                         purchaseDate: Self.base, signedDate: Self.base)
            try await record(share, "partial")
            var whole = share
            whole.cancellationDate = Self.base.addingTimeInterval(10)  // a receipt's refund: no share, the whole
            whole.signedDate = nil
            try await record(whole, "partial")
            #expect(try await ledger("part-2", user: "partial", on: pool).balance == 0)
            var partial = whole
            partial.signedDate = Self.base.addingTimeInterval(20)  // Apple's statement: 30 % refunded
            partial.revocationPercentage = 30_000
            try await record(partial, "partial")
            try await record(partial, "partial")
            #expect(try await ledger("part-2", user: "partial", on: pool).balance == 70)
            partial.signedDate = Self.base.addingTimeInterval(30)  // then the rest
            partial.revocationPercentage = nil
            try await record(partial, "partial")
            let adjusted = try await ledger("part-2", user: "partial", on: pool)
            #expect(adjusted.entries.map(\.kind) == ["credit", "refund", "refund_adjustment", "refund_adjustment"])
            #expect(adjusted.entries.map(\.amount) == [100, -100, 70, -70] && adjusted.balance == 0)
            // A share out of range is a whole refund.
            #expect(StoreTransaction(transactionID: "x", originalTransactionID: "x", productID: "p", purchaseDate: Self.base,
                                     revocationPercentage: 100_001).revocationPercentage == nil)
        }
    }

}
