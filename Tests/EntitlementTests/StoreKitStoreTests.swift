import EntitlementModel
import Foundation
import Testing
@testable import EntitlementService
@testable import ServiceRuntime

/// The StoreKit 2 stores and the recorder's rules for signed statements, against a migrated database.
@Suite(.serialized, .timeLimit(.minutes(2)))
@Loop
struct StoreKitStoreTests {
    private func notification(_ uuid: String, signed: Date, purchase: String? = "p-1", state: NotificationState = .received,
                              type: String = "DID_RENEW") -> StoredNotification {
        StoredNotification(uuid: uuid, version: 2, type: type, subtype: nil, signedDate: signed, environment: "Sandbox",
                             originalTransactionID: purchase, transactionID: purchase, signedPayload: "a.b.c",
                             transactionInfo: Data(#"{"transactionId": "t"}"#.utf8), renewalInfo: nil, state: state)
    }

    @Test func aUsersTokenIsCreatedOnceAndConcurrentFirstCallsAgree() async throws {
        try await TestDatabase.withMigratedDatabase { _, pool in
            let store = AppAccountTokenStore()
            let calls = (0..<16).map { _ in Task { @Loop in try await store.token(for: "racer", on: pool) } }
            var tokens: Set<UUID> = []
            for call in calls { tokens.insert(try await call.value) }
            #expect(tokens.count == 1)
            let token = try #require(tokens.first)
            #expect(try await store.token(for: "racer", on: pool) == token)
            let other = try await store.token(for: "someone", on: pool)
            #expect(other != token)

            let order = try await pool.query("INSERT INTO orders (user_id, product_id) VALUES ('buyer', 'p') RETURNING app_account_token", []).single().uuid("app_account_token")
            let users = try await store.users(of: [token, other, order, UUID()], on: pool)
            #expect(users == [token: "racer", other: "someone", order: "buyer"])
            #expect(try await store.users(of: [], on: pool).isEmpty)
        }
    }

    @Test func aNotificationIsStoredOnceAndClaimedByOneWorkerInSignedOrder() async throws {
        try await TestDatabase.withMigratedDatabase { _, pool in
            let store = NotificationStore()
            let base = Date(timeIntervalSince1970: 1_800_000_000)
            #expect(try await store.insert(notification("n-0", signed: base), lease: .seconds(60), on: pool))
            #expect(try await !store.insert(notification("n-0", signed: base.addingTimeInterval(5), purchase: "other"), lease: .zero, on: pool))
            // Left to the request that stored it: not due before its lease ends.
            #expect(try await store.claimDue(limit: 10, lease: .seconds(60), on: pool).isEmpty)

            for index in (1...40).reversed() {
                _ = try await store.insert(notification("n-\(index)", signed: base.addingTimeInterval(Double(index))), lease: .zero, on: pool)
            }
            let workers = (0..<4).map { _ in Task { @Loop in try await store.claimDue(limit: 16, lease: .seconds(60), on: pool) } }
            var claims: [[StoredNotification]] = []
            for worker in workers { claims.append(try await worker.value) }
            let claimed = claims.flatMap { $0.map(\.uuid) }
            #expect(claimed.count == 40 && Set(claimed).count == 40)
            for batch in claims {
                #expect(batch.map(\.signedDate) == batch.map(\.signedDate).sorted())
                #expect(batch.allSatisfy { $0.attempts == 1 && $0.transactionInfo == Data(#"{"transactionId": "t"}"#.utf8) })
            }
            #expect(try await store.claimDue(limit: 10, lease: .seconds(60), on: pool).isEmpty)

            // Settled, a notification is no longer received; parked ones are found by purchase, oldest first.
            try await store.settle("n-2", owner: nil, on: pool)
            try await store.settle("n-1", owner: nil, on: pool)
            try await store.settle("n-3", owner: "u", on: pool)
            let parked = try await pool.transaction { connection in try await store.lockParked(of: "p-1", on: connection).map(\.uuid) }
            #expect(parked == ["n-1", "n-2"])
            #expect(try await pool.transaction { try await store.lockReceived(upTo: "n-3", on: $0) }.isEmpty)
            #expect(try await pool.transaction { try await store.lockReceived(upTo: "n-4", on: $0) }.last?.uuid == "n-4")

            try await store.retryLater("n-4", delay: .seconds(60), error: "boom", on: pool)
            let row = try await pool.query("SELECT last_error, next_attempt_at > now() + interval '50 seconds' AS later FROM app_store_notifications WHERE notification_uuid = 'n-4'", []).single()
            #expect(try row.string("last_error") == "boom" && row.bool("later"))
        }
    }

    @Test func notificationsArePagedNewestFirstAndFilteredByType() async throws {
        try await TestDatabase.withMigratedDatabase { _, pool in
            let store = NotificationStore()
            for index in 0..<7 {
                _ = try await store.insert(notification("page-\(index)", signed: Date(), state: .ignored, type: index < 3 ? "TEST" : "REFUND"),
                                           lease: .zero, on: pool)
            }
            var seen: [String] = []
            var cursor: AuditCursor?
            repeat {
                let page = try await store.page(.init(limit: 3, cursor: cursor, type: nil), on: pool)
                seen += page.items.map(\.uuid)
                cursor = page.nextCursor.flatMap(AuditCursor.init(text:))
            } while cursor != nil
            #expect(seen == (0..<7).reversed().map { "page-\($0)" })
            let tests = try await store.page(.init(limit: 50, cursor: nil, type: "TEST"), on: pool)
            #expect(tests.items.map(\.uuid) == ["page-2", "page-1", "page-0"] && tests.nextCursor == nil)
        }
    }

    @Test func aPurchasesLockIsHeldUntilItsTransactionEnds() async throws {
        try await TestDatabase.withMigratedDatabase { url, pool in
            let other = try await PostgresConnection.connect(url)
            defer { other.close() }
            _ = try await other.query("SET lock_timeout = '200ms'", [])
            try await pool.transaction { connection in
                _ = try await connection.query("SELECT lock_purchases(ARRAY['b', 'a'])", [])
                await #expect(throws: PostgresError.self) {
                    _ = try await other.query("SELECT lock_purchases(ARRAY['a'])", [])
                }
                // Other purchases are not held.
                _ = try await other.query("SELECT lock_purchases(ARRAY['c'])", [])
            }
            _ = try await other.query("SELECT lock_purchases(ARRAY['a', 'b'])", [])
        }
    }

    /// A subscription transaction of purchase `s-1`, as a receipt (no signed date) or a signed statement.
    private func statement(refunded: Date? = nil, signed: Date? = nil, expires: Date) -> StoreTransaction {
        StoreTransaction(transactionID: "s-1", originalTransactionID: "s-1", productID: "com.example.premium.monthly",
                         purchaseDate: Date(timeIntervalSince1970: 1_800_000_000), expiresDate: expires, cancellationDate: refunded,
                         cancellationReason: refunded == nil ? nil : "0", signedDate: signed)
    }

    @Test func theNewestSignedStatementDecidesARefundAndAReceiptOnlyAddsOne() async throws {
        try await TestDatabase.withMigratedDatabase { _, pool in
            let recorder = PurchaseRecorder(db: pool, restorePolicy: .transfer,
                                            events: EventRecorder(catalog: CatalogCache(db: pool), delivers: false))
            try await TestDatabase.storeHarnessCatalog(on: pool)
            let t = { (seconds: Double) in Date(timeIntervalSince1970: 1_800_000_000 + seconds) }
            let record = { (transaction: StoreTransaction) in
                _ = try await recorder.record(transactions: [transaction], renewals: [], latestReceipt: nil, appleStatus: 0, environment: .sandbox,
                                              context: .init(poster: "u", movesOwnership: true, actor: "test", claim: nil, orderID: nil))
            }
            let stored = {
                let row = try await pool.query("SELECT cancellation_date, expires_date, signed_date FROM app_store_transactions WHERE transaction_id = 's-1'", []).single()
                return (refunded: try row.optionalDate("cancellation_date"), expires: try row.date("expires_date"), signed: try row.optionalDate("signed_date"))
            }
            try await record(statement(expires: t(100)))
            try await record(statement(refunded: t(50), expires: t(100)))                 // a receipt reports a refund
            #expect(try await stored().refunded == t(50))
            try await record(statement(signed: t(40), expires: t(100)))                   // signed before the refund: changes nothing
            #expect(try await stored().refunded == t(50))
            try await record(statement(signed: t(60), expires: t(200)))                   // signed after it, without one: reversed
            var now = try await stored()
            #expect(now.refunded == nil)
            #expect(now.expires == t(200))
            #expect(now.signed == t(60))
            try await record(statement(refunded: t(50), expires: t(100)))                 // the old refund in a receipt: not again
            try await record(statement(refunded: t(55), signed: t(58), expires: t(100)))  // an older signed statement: nothing
            now = try await stored()
            #expect(now.refunded == nil)
            #expect(now.expires == t(200))
            #expect(now.signed == t(60))
            try await record(statement(refunded: t(70), expires: t(200)))                 // a new refund after it, by receipt
            #expect(try await stored().refunded == t(70))
            try await record(statement(refunded: t(75), signed: t(80), expires: t(200)))  // a newer signed statement's refund
            now = try await stored()
            #expect(now.refunded == t(75) && now.signed == t(80))
        }
    }
}
