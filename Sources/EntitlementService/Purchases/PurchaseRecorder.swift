import ServiceRuntime
import EntitlementModel
import Foundation

/// A verified receipt whose purchase already belongs to another user, with `RESTORE_POLICY=keep`.
struct OwnershipConflict: Error, Sendable {
    var originalTransactionID: String
    var owner: String
}

/// What recording a verified receipt changed, for the answer to the client.
struct RecordedPurchases: Sendable {
    /// Previous owners of purchases that moved to the poster (`transferred_from`).
    var transferredFrom: [String]
    /// How many transactions were seen for the first time.
    var newTransactions: Int
}

/// Applies one verified App Store answer to the store in ONE database transaction: every transaction of
/// `in_app` and `latest_receipt_info` once (by `transaction_id`), ownership by the restore policy and by
/// orders' `app_account_token`, subscription renewal state, consumable credits and refund debits once per
/// transaction, order fulfilment, audit events for transfers, and the submission marked verified.
///
/// Every "once" rests on a unique key of the schema, so concurrent recordings of the same receipt cannot
/// count anything twice; a conflict under `keep` rolls everything back. The webhook events of every user whose
/// state the recording changes (the purchases' owners, the poster, both sides of a transfer) are written in the
/// same transaction.
@Loop
struct PurchaseRecorder {
    let db: PostgresPool
    let restorePolicy: RestorePolicy
    let events: EventRecorder

    /// Who posted, and under which submission (nil for the renewal refresher's re-verifications).
    struct Context: Sendable {
        var poster: String
        /// True for a user's own post: the restore policy may move purchases to the poster (or refuse with a
        /// conflict). False for Apple's reports (notifications, renewal refreshes), recorded for whoever owns
        /// each purchase when the transaction runs: a transfer that committed since the owner was looked up
        /// stands.
        var movesOwnership: Bool
        var actor: String
        var verificationID: String?
        var orderID: String?
    }

    func record(_ response: AppStoreResponse, environment: StoreEnvironment, catalog: Catalog, context: Context) async throws -> RecordedPurchases {
        try await record(transactions: response.transactions(), renewals: response.renewalInfo(), latestReceipt: response.latestReceipt,
                         appleStatus: response.status, environment: environment, catalog: catalog, context: context)
    }

    /// Records what Apple said about some purchases, from a verifyReceipt answer or a notification.
    func record(transactions: [StoreTransaction], renewals renewalList: [RenewalInfo], latestReceipt: String?, appleStatus: Int,
                environment: StoreEnvironment, catalog: Catalog, context: Context) async throws -> RecordedPurchases {
        let renewals = Dictionary(renewalList.map { ($0.originalTransactionID, $0) }) { _, last in last }
        var unwatched: Set<String> = []
        while true {
            do {
                return try await recordOnce(transactions: transactions, renewals: renewals, latestReceipt: latestReceipt,
                                            appleStatus: appleStatus, environment: environment, catalog: catalog, context: context,
                                            alsoWatching: unwatched)
            } catch let changed as EventScopeChanged where changed.users.isSubset(of: unwatched) == false {
                unwatched.formUnion(changed.users)  // an owner changed under us: again, watching them too
            }
        }
    }

    private func recordOnce(transactions: [StoreTransaction], renewals: [String: RenewalInfo], latestReceipt: String?, appleStatus: Int,
                            environment: StoreEnvironment, catalog: Catalog, context: Context,
                            alsoWatching: Set<String>) async throws -> RecordedPurchases {
        try await db.transaction { connection in
            if let id = context.verificationID {
                let status = try await connection.query(
                    "SELECT status FROM receipt_submissions WHERE verification_id = $1::uuid FOR UPDATE", [id]).rows.first
                if try status?.string("status") == SubmissionStatus.verified.rawValue {
                    return RecordedPurchases(transferredFrom: [], newTransactions: 0)
                }
            }
            let purchases = Set(transactions.map(\.originalTransactionID))
            let users = try await usersConcerned(transactions, context: context, on: connection)
            let watch = try await events.watch(users.union(alsoWatching), catalog: catalog, now: Date(), on: connection)
            let inserted = try await insertTransactions(transactions, environment: environment, context: context, on: connection)
            let transfers = try await applyOwnership(transactions, catalog: catalog, context: context, on: connection)
            try await updateSubscriptions(transactions, renewals: renewals, latestReceipt: latestReceipt,
                                          environment: environment, catalog: catalog, on: connection)
            try await applyConsumables(transactions, catalog: catalog, on: connection)
            try await fulfilOrders(transactions, context: context, on: connection)
            if let id = context.verificationID {
                _ = try await connection.query("""
                    UPDATE receipt_submissions
                       SET status = 'verified', apple_status = $2, environment = $3, claimed_until = NULL,
                           last_error = NULL, updated_at = now(), resolved_at = now()
                     WHERE verification_id = $1::uuid
                    """, [id, appleStatus, environment.rawValue])
            }
            let report = AppStoreReport(transactions: transactions, newTransactionIDs: inserted,
                                        productTypes: catalog.products.reduce(into: [:]) { $0[$1.productID] = $1.type })
            let owners = try await owners(of: purchases, on: connection)
            try await events.finish(watch, affected: Set(owners.values).union(transfers.map(\.from)), cause: { user in
                if let moved = transfers.first(where: { $0.to == user }) { return .transferredIn(from: moved.from) }
                if let moved = transfers.first(where: { $0.from == user }) { return .transferredOut(to: moved.to) }
                return .appStore(report)
            }, on: connection)
            return RecordedPurchases(transferredFrom: Array(Set(transfers.map(\.from))).sorted(), newTransactions: inserted.count)
        }
    }

    /// Every user a recording of `transactions` may change, locking the purchases' owner rows: their owners now,
    /// the users of orders their `app_account_token`s name, and the poster.
    private func usersConcerned(_ transactions: [StoreTransaction], context: Context, on connection: PostgresConnection) async throws -> Set<String> {
        var users: Set<String> = [context.poster]
        let purchases = Set(transactions.map(\.originalTransactionID))
        users.formUnion(try await owners(of: purchases, locking: true, on: connection).values)
        let tokens = Set(transactions.compactMap { $0.appAccountToken?.lowercased() })
        if !tokens.isEmpty {
            users.formUnion(try await connection.query("""
                SELECT user_id FROM orders WHERE app_account_token::text IN (SELECT jsonb_array_elements_text($1::jsonb))
                """, [try PostgresJSON(encoding: tokens.sorted())]).rows.map { try $0.string("user_id") })
        }
        return users
    }

    /// The owner of each of `purchases` that has one (their rows locked, in id order, when `locking`).
    private func owners(of purchases: Set<String>, locking: Bool = false, on connection: PostgresConnection) async throws -> [String: String] {
        guard !purchases.isEmpty else { return [:] }
        var owners: [String: String] = [:]
        for row in try await connection.query("""
            SELECT original_transaction_id, user_id FROM purchase_owners
             WHERE original_transaction_id IN (SELECT jsonb_array_elements_text($1::jsonb))
             ORDER BY original_transaction_id
            \(locking ? "FOR UPDATE" : "")
            """, [try PostgresJSON(encoding: purchases.sorted())]).rows {
            owners[try row.string("original_transaction_id")] = try row.string("user_id")
        }
        return owners
    }

    /// Inserts unseen transactions and folds later facts (refund, upgrade, expiry) into known ones.
    private func insertTransactions(_ transactions: [StoreTransaction], environment: StoreEnvironment, context: Context,
                                    on connection: PostgresConnection) async throws -> Set<String> {
        guard !transactions.isEmpty else { return [] }
        let rows = try await connection.query("""
            INSERT INTO app_store_transactions AS t (
                transaction_id, original_transaction_id, product_id, environment, purchase_date, original_purchase_date,
                expires_date, cancellation_date, cancellation_reason, is_upgraded, is_trial_period,
                is_in_intro_offer_period, ownership, quantity, web_order_line_item_id, subscription_group_identifier,
                app_account_token, promotional_offer_id, first_verification_id)
            SELECT x.transaction_id, x.original_transaction_id, x.product_id, $2, x.purchase_date, x.original_purchase_date,
                   x.expires_date, x.cancellation_date, x.cancellation_reason, x.is_upgraded, x.is_trial_period,
                   x.is_in_intro_offer_period, x.ownership, x.quantity, x.web_order_line_item_id,
                   x.subscription_group_identifier, lower(x.app_account_token), x.promotional_offer_id, $3::uuid
              FROM jsonb_to_recordset($1::jsonb) AS x(
                   transaction_id text, original_transaction_id text, product_id text, purchase_date timestamptz,
                   original_purchase_date timestamptz, expires_date timestamptz, cancellation_date timestamptz,
                   cancellation_reason text, is_upgraded boolean, is_trial_period boolean,
                   is_in_intro_offer_period boolean, ownership text, quantity integer, web_order_line_item_id text,
                   subscription_group_identifier text, app_account_token text, promotional_offer_id text)
            ON CONFLICT (transaction_id) DO UPDATE SET
                expires_date = COALESCE(EXCLUDED.expires_date, t.expires_date),
                cancellation_date = COALESCE(t.cancellation_date, EXCLUDED.cancellation_date),
                cancellation_reason = COALESCE(t.cancellation_reason, EXCLUDED.cancellation_reason),
                is_upgraded = t.is_upgraded OR EXCLUDED.is_upgraded,
                app_account_token = COALESCE(t.app_account_token, EXCLUDED.app_account_token),
                updated_at = now()
            RETURNING t.transaction_id, (xmax = 0) AS inserted
            """, [PostgresJSON(try TransactionRows.json(transactions)), environment.rawValue, context.verificationID])
        return Set(try rows.rows.filter { try $0.bool("inserted") }.map { try $0.string("transaction_id") })
    }

    /// Decides and applies the owner of every purchase in the receipt; returns the moves made.
    private func applyOwnership(_ transactions: [StoreTransaction], catalog: Catalog, context: Context,
                                on connection: PostgresConnection) async throws -> [(from: String, to: String)] {
        var orderUsers: [String: String] = [:]
        let tokens = Set(transactions.compactMap { $0.appAccountToken?.lowercased() })
        if !tokens.isEmpty {
            for row in try await connection.query("""
                SELECT app_account_token::text AS token, user_id FROM orders
                 WHERE app_account_token::text IN (SELECT jsonb_array_elements_text($1::jsonb))
                """, [try PostgresJSON(encoding: Array(tokens))]).rows {
                orderUsers[try row.string("token")] = try row.string("user_id")
            }
        }
        var purchases: [String: (orderUser: String?, consumable: Bool)] = [:]
        for transaction in transactions {
            let orderUser = transaction.appAccountToken.flatMap { orderUsers[$0.lowercased()] }
            let consumable = catalog.product(transaction.productID)?.type == .consumable
            let known = purchases[transaction.originalTransactionID]
            purchases[transaction.originalTransactionID] = (known?.orderUser ?? orderUser, consumable)
        }
        guard !purchases.isEmpty else { return [] }

        // Claim what nobody owns yet; the unique key settles concurrent claims.
        // In one order (by id) in every transaction, so concurrent recordings cannot deadlock on these rows.
        let claims = purchases.sorted { $0.key < $1.key }.map { id, purchase in
            ["original_transaction_id": id, "user_id": purchase.orderUser ?? context.poster]
        }
        _ = try await connection.query("""
            INSERT INTO purchase_owners (original_transaction_id, user_id)
            SELECT x.original_transaction_id, x.user_id FROM jsonb_to_recordset($1::jsonb) AS x(original_transaction_id text, user_id text)
            ON CONFLICT (original_transaction_id) DO NOTHING
            """, [try PostgresJSON(encoding: claims)])
        guard context.movesOwnership else { return [] }
        let owners = try await connection.query("""
            SELECT original_transaction_id, user_id FROM purchase_owners
             WHERE original_transaction_id IN (SELECT jsonb_array_elements_text($1::jsonb))
             ORDER BY original_transaction_id
             FOR UPDATE
            """, [try PostgresJSON(encoding: purchases.keys.sorted())])

        var transfers: [(from: String, to: String)] = []
        for row in owners.rows {
            let id = try row.string("original_transaction_id")
            let owner = try row.string("user_id")
            guard let purchase = purchases[id], !purchase.consumable else { continue }  // credits stay where they were made
            switch OwnershipRules.decide(currentOwner: owner, poster: context.poster, orderUser: purchase.orderUser,
                                         transferOnRestore: restorePolicy == .transfer) {
            case .claim, .unchanged:
                continue
            case .conflict(let owner, _):
                throw OwnershipConflict(originalTransactionID: id, owner: owner)
            case .transfer(let from, let to):
                _ = try await connection.query("""
                    UPDATE purchase_owners SET user_id = $2, acquired_at = now() WHERE original_transaction_id = $1
                    """, [id, to])
                let audit = AuditLog.record(actor: context.actor, action: AuditLog.Action.ownershipTransfer, subject: id, userID: to,
                                            before: try PostgresJSON(encoding: ["user_id": from]), after: try PostgresJSON(encoding: ["user_id": to]))
                _ = try await connection.query(audit.sql, audit.parameters)
                Log.info("ownership_transfer", ["original_transaction_id": id, "from": from, "to": to])
                transfers.append((from, to))
            }
        }
        return transfers
    }

    /// Folds the receipt's view of each auto-renewable subscription into `subscriptions`.
    private func updateSubscriptions(_ transactions: [StoreTransaction], renewals: [String: RenewalInfo], latestReceipt: String?,
                                     environment: StoreEnvironment, catalog: Catalog, on connection: PostgresConnection) async throws {
        let chains = Dictionary(grouping: transactions.filter { $0.expiresDate != nil }, by: \.originalTransactionID)
        guard !chains.isEmpty else { return }
        let now = Date()
        var rows: [[String: String?]] = []
        for (id, chain) in chains.sorted(by: { $0.key < $1.key }) {  // one lock order, as for the owners
            guard let latest = chain.max(by: { ($0.expiresDate!, $0.purchaseDate) < ($1.expiresDate!, $1.purchaseDate) }) else { continue }
            let renewal = renewals[id]
            let next = RefreshSchedule.next(
                expiresAt: latest.expiresDate, willRenew: renewal?.willRenew ?? false,
                inBillingRetry: renewal?.isInBillingRetryPeriod ?? false,
                gracePeriodExpiresAt: renewal?.gracePeriodExpiresDate, now: now)
            rows.append([
                "original_transaction_id": id,
                "product_id": latest.productID,
                "auto_renew_product_id": renewal?.autoRenewProductID,
                "will_renew": renewal.map { String($0.willRenew) },
                "expiration_intent": renewal?.expirationIntent.map(String.init),
                "in_billing_retry": renewal.map { String($0.isInBillingRetryPeriod) },
                "grace_period_expires_date": renewal?.gracePeriodExpiresDate.map(PostgresTimestamp.format),
                "price_consent_status": renewal?.priceConsentStatus.map(String.init),
                "latest_expires_date": latest.expiresDate.map(PostgresTimestamp.format),
                "next_refresh_at": next.map(PostgresTimestamp.format),
            ])
        }
        let json = try PostgresJSON(encoding: rows)
        _ = try await connection.query("""
            INSERT INTO subscriptions AS s (original_transaction_id, product_id, latest_expires_date, latest_receipt, environment, next_refresh_at)
            SELECT x.original_transaction_id, x.product_id, x.latest_expires_date, $2, $3, x.next_refresh_at
              FROM jsonb_to_recordset($1::jsonb) AS x(
                   original_transaction_id text, product_id text, latest_expires_date timestamptz, next_refresh_at timestamptz)
            ON CONFLICT (original_transaction_id) DO UPDATE SET
                product_id = CASE WHEN s.latest_expires_date IS NULL OR EXCLUDED.latest_expires_date >= s.latest_expires_date
                                  THEN EXCLUDED.product_id ELSE s.product_id END,
                latest_expires_date = GREATEST(s.latest_expires_date, EXCLUDED.latest_expires_date),
                latest_receipt = COALESCE(EXCLUDED.latest_receipt, s.latest_receipt),
                environment = EXCLUDED.environment,
                next_refresh_at = EXCLUDED.next_refresh_at,
                refresh_attempts = 0,
                updated_at = now()
            """, [json, latestReceipt, environment.rawValue])
        // Renewal info describes the subscription now: where Apple sent it, it replaces what we had.
        _ = try await connection.query("""
            UPDATE subscriptions s SET
                auto_renew_product_id = x.auto_renew_product_id, will_renew = x.will_renew,
                expiration_intent = x.expiration_intent, in_billing_retry = x.in_billing_retry,
                grace_period_expires_date = x.grace_period_expires_date, price_consent_status = x.price_consent_status
              FROM jsonb_to_recordset($1::jsonb) AS x(
                   original_transaction_id text, auto_renew_product_id text, will_renew boolean, expiration_intent integer,
                   in_billing_retry boolean, grace_period_expires_date timestamptz, price_consent_status integer)
             WHERE s.original_transaction_id = x.original_transaction_id AND x.will_renew IS NOT NULL
            """, [json])
    }

    /// Credits each consumable once per transaction to its owner, and debits it once when Apple reports it
    /// refunded. The stored transaction decides (it keeps a refund once any receipt showed one), not the
    /// receipt at hand: an older receipt posted after the refund was seen credits nothing.
    private func applyConsumables(_ transactions: [StoreTransaction], catalog: Catalog, on connection: PostgresConnection) async throws {
        for transaction in transactions {
            guard let product = catalog.product(transaction.productID), product.type == .consumable,
                  let currency = product.currency, let amount = product.amount else { continue }
            let total = amount * max(1, transaction.quantity)
            _ = try await connection.query("""
                WITH owner AS (SELECT user_id FROM purchase_owners WHERE original_transaction_id = $2),
                     live AS (SELECT 1 FROM app_store_transactions WHERE transaction_id = $1 AND cancellation_date IS NULL),
                     entry AS (
                        INSERT INTO consumable_ledger (user_id, currency, amount, kind, transaction_id)
                        SELECT owner.user_id, $3, $4, 'credit', $1 FROM owner, live
                        ON CONFLICT (transaction_id, kind) WHERE transaction_id IS NOT NULL DO NOTHING
                        RETURNING user_id, currency, amount)
                INSERT INTO consumable_balances AS b (user_id, currency, balance)
                SELECT user_id, currency, amount FROM entry
                ON CONFLICT (user_id, currency) DO UPDATE SET balance = b.balance + EXCLUDED.balance
                """, [transaction.transactionID, transaction.originalTransactionID, currency, total])
            _ = try await connection.query("""
                WITH credit AS (
                        SELECT user_id, currency, amount FROM consumable_ledger
                         WHERE transaction_id = $1 AND kind = 'credit'
                           AND EXISTS (SELECT 1 FROM app_store_transactions WHERE transaction_id = $1 AND cancellation_date IS NOT NULL)),
                     entry AS (
                        INSERT INTO consumable_ledger (user_id, currency, amount, kind, transaction_id)
                        SELECT user_id, currency, -amount, 'refund', $1 FROM credit
                        ON CONFLICT (transaction_id, kind) WHERE transaction_id IS NOT NULL DO NOTHING
                        RETURNING user_id, currency, amount)
                UPDATE consumable_balances b SET balance = b.balance + entry.amount
                  FROM entry WHERE b.user_id = entry.user_id AND b.currency = entry.currency
                """, [transaction.transactionID])
        }
    }

    /// Marks orders fulfilled: by the `app_account_token` their purchase carries, or by the `order_id` the
    /// client posted with the receipt (the newest matching transaction not bound to another order).
    private func fulfilOrders(_ transactions: [StoreTransaction], context: Context, on connection: PostgresConnection) async throws {
        let byToken = Dictionary(grouping: transactions.filter { $0.appAccountToken != nil }) { $0.appAccountToken!.lowercased() }
        for (token, bound) in byToken {
            guard let first = bound.min(by: { $0.purchaseDate < $1.purchaseDate }) else { continue }
            _ = try await connection.query("""
                UPDATE orders SET status = 'fulfilled', transaction_id = $2, fulfilled_at = now()
                 WHERE app_account_token::text = $1 AND status = 'created'
                   AND NOT EXISTS (SELECT 1 FROM orders WHERE transaction_id = $2)
                """, [token, first.transactionID])
        }
        guard let orderID = context.orderID else { return }
        let order = try await connection.query("""
            SELECT product_id FROM orders WHERE order_id = $1::uuid AND user_id = $2 AND status = 'created' FOR UPDATE
            """, [orderID, context.poster]).rows.first
        guard let productID = try order?.string("product_id"),
              let match = transactions.filter({ $0.productID == productID && $0.appAccountToken == nil })
                .max(by: { $0.purchaseDate < $1.purchaseDate }) else { return }
        _ = try await connection.query("""
            UPDATE orders SET status = 'fulfilled', transaction_id = $2, fulfilled_at = now()
             WHERE order_id = $1::uuid AND status = 'created' AND NOT EXISTS (SELECT 1 FROM orders WHERE transaction_id = $2)
            """, [orderID, match.transactionID])
    }
}
