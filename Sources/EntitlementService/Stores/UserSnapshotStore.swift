import ServiceRuntime
import EntitlementModel
import Foundation

/// Everything the entitlement evaluator needs about one user, read at one instant.
struct UserSnapshot: Sendable {
    var transactions: [OwnedTransaction]
    var renewals: [RenewalInfo]
    var grants: [Grant]
    /// Ledger balances by consumable currency.
    var balances: [String: Int]

    /// What the user holds at `at` under `catalog`.
    func report(catalog: Catalog, at: Date) -> EntitlementReport {
        EntitlementEvaluator.evaluate(transactions: transactions, renewals: renewals, grants: grants, catalog: catalog, at: at)
    }
}

/// The read side of users' purchases: their transactions and subscriptions (through `purchase_owners`), grants
/// and consumable balances, sent as one pipelined round trip of prepared statements, one per table for any
/// number of users (`user_id = ANY($1)`), the rows then split by user.
@Loop
struct UserSnapshotStore {
    /// The snapshots of `userIDs`, in their order (a user without rows gets an empty one; the ids must differ),
    /// all from one read-only REPEATABLE READ snapshot (a recording committing in between cannot show half).
    func snapshots(of userIDs: [String], on pool: PostgresPool) async throws -> [UserSnapshot] {
        let results = try await pool.readTransaction([Self.genericPlans] + Self.statements(userIDs), isolation: .repeatableRead)
        return try Self.decode(Array(results.dropFirst()), userIDs)
    }

    /// The statements take any number of users. Left to itself PostgreSQL would plan each execution anew
    /// (a custom plan: single-user executions look cheaper than the generic plan, which then never wins),
    /// about 0.1 ms per statement; the generic plan is right for every size. For this transaction only.
    private static let genericPlans = PostgresStatement("SET LOCAL plan_cache_mode = force_generic_plan")

    /// The snapshot of `userID`, as `snapshots(of:on:)`.
    func snapshot(of userID: String, on pool: PostgresPool) async throws -> UserSnapshot {
        try await snapshots(of: [userID], on: pool)[0]
    }

    /// The snapshots of `userIDs` (which must differ), in their order, read inside the caller's transaction on
    /// `connection` (which sees its own uncommitted writes): one round trip for any number of users.
    func snapshots(of userIDs: [String], within connection: PostgresConnection) async throws -> [UserSnapshot] {
        guard !userIDs.isEmpty else { return [] }
        return try Self.decode(try await connection.pipeline(Self.statements(userIDs)), userIDs)
    }

    /// The four statements, the users' array literal built once for all of them.
    private static func statements(_ userIDs: [String]) -> [PostgresStatement] {
        let users = PostgresPreencoded(userIDs)
        return [
            PostgresStatement(transactionsSQL, [users]), PostgresStatement(renewalsSQL, [users]),
            PostgresStatement(grantsSQL, [users]), PostgresStatement(balancesSQL, [users]),
        ]
    }

    // The SQL texts are built once: the connection finds a statement it prepared by its text, and the same
    // string each time is found without building and comparing a copy. Each row names its user (`user_id`).
    private static let transactionsSQL = """
        SELECT o.user_id, \(TransactionStore.columns)
          FROM purchase_owners o JOIN app_store_transactions t USING (original_transaction_id)
         WHERE o.user_id = ANY($1)
        """
    private static let renewalsSQL = """
        SELECT o.user_id, s.original_transaction_id, s.product_id, s.auto_renew_product_id, s.will_renew,
               s.expiration_intent, s.in_billing_retry, s.grace_period_expires_date, s.price_consent_status
          FROM purchase_owners o JOIN subscriptions s USING (original_transaction_id)
         WHERE o.user_id = ANY($1)
        """
    private static let grantsSQL = """
        SELECT grant_id, user_id, entitlement, created_at, expires_at, revoked_at, reason FROM grants WHERE user_id = ANY($1)
        """
    private static let balancesSQL = "SELECT user_id, currency, balance FROM consumable_balances WHERE user_id = ANY($1)"

    /// The rows of the four results split by their `user_id`: one snapshot for each of `userIDs`, in their order.
    private static func decode(_ results: [PostgresResult], _ userIDs: [String]) throws -> [UserSnapshot] {
        var snapshots = Array(repeating: UserSnapshot(transactions: [], renewals: [], grants: [], balances: [:]),
                              count: userIDs.count)
        let owners = OwnerPositions(userIDs)
        let transaction = try TransactionStore.OwnedDecoder(results[0])
        for (owner, row) in zip(try owners.of(results[0]), results[0].rows) {
            snapshots[owner].transactions.append(try transaction.decode(row))
        }
        for (owner, renewal) in zip(try owners.of(results[1]), try renewals(results[1])) {
            snapshots[owner].renewals.append(renewal)
        }
        for (owner, grant) in zip(try owners.of(results[2]), try GrantStore.grants(results[2])) {
            snapshots[owner].grants.append(grant)
        }
        let currency = try results[3].column("currency"), balance = try results[3].column("balance")
        for (owner, row) in zip(try owners.of(results[3]), results[3].rows) {
            snapshots[owner].balances[try row.string(currency)] = try row.int(balance)
        }
        return snapshots
    }

    /// Finds which of the users a row's `user_id` names by comparing its bytes, with no `String` made and nothing
    /// hashed: first the user of the row before (PostgreSQL returns a user's rows together when it scans an index
    /// for `= ANY`), then the others in turn (a batch has at most `UserSnapshotLoader.maxBatch`).
    private struct OwnerPositions {
        private let userIDs: [[UInt8]]

        init(_ userIDs: [String]) {
            self.userIDs = userIDs.map { Array($0.utf8) }
        }

        /// The position among the users of each row's `user_id` in `result`, in row order.
        func of(_ result: PostgresResult) throws -> [Int] {
            let column = try result.column("user_id")
            var last = 0
            return try result.rows.map { row in
                last = try row.withBytes(column) { bytes in
                    if Self.same(bytes, userIDs[last]) { return last }
                    guard let position = userIDs.firstIndex(where: { Self.same(bytes, $0) }) else {
                        throw PostgresError(kind: .decoding, message: "a row's user_id is none of the users read")
                    }
                    return position
                }
                return last
            }
        }

        /// True when `bytes` are exactly `userID`'s.
        private static func same(_ bytes: UnsafeBufferPointer<UInt8>, _ userID: [UInt8]) -> Bool {
            userID.withUnsafeBufferPointer { bytes.sameBytes(as: $0) }
        }
    }

    private static func renewals(_ result: PostgresResult) throws -> [RenewalInfo] {
        let originalTransactionID = try result.column("original_transaction_id"), productID = try result.column("product_id"),
            autoRenewProductID = try result.column("auto_renew_product_id"), willRenew = try result.column("will_renew"),
            expirationIntent = try result.column("expiration_intent"), inBillingRetry = try result.column("in_billing_retry"),
            gracePeriodExpiresDate = try result.column("grace_period_expires_date"),
            priceConsentStatus = try result.column("price_consent_status")
        return try result.rows.map { row in
            RenewalInfo(
                originalTransactionID: try row.string(originalTransactionID),
                productID: try row.string(productID),
                autoRenewProductID: try row.optionalString(autoRenewProductID),
                willRenew: try row.bool(willRenew),
                expirationIntent: try row.optionalInt(expirationIntent),
                isInBillingRetryPeriod: try row.bool(inBillingRetry),
                gracePeriodExpiresDate: try row.optionalDate(gracePeriodExpiresDate),
                priceConsentStatus: try row.optionalInt(priceConsentStatus))
        }
    }
}
