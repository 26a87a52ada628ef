import ServiceRuntime
import Foundation

/// The `purchase_owners` table: who owns each purchase (an original transaction id and every transaction
/// sharing it). Rows are claimed and locked in id order in every transaction, so concurrent recordings cannot
/// deadlock on them.
@Loop
struct OwnerStore {
    /// Locks the purchases `originalTransactionIDs` (in one order: two callers locking several cannot deadlock)
    /// until the caller's transaction ends. Everything that decides or uses a purchase's owner takes it first:
    /// recordings (which may claim it and then apply its parked notifications) and notification applications
    /// (which may park one), so a notification is never parked while its owner is being recorded.
    func lockPurchases(_ originalTransactionIDs: [String], on db: some PostgresQueryable) async throws {
        let ids = Set(originalTransactionIDs).sorted()
        guard !ids.isEmpty else { return }
        _ = try await db.query("SELECT lock_purchases($1)", [ids])
    }

    /// Records owners for purchases nobody owns yet (`owners` maps original transaction ids to users); the
    /// unique key settles concurrent claims, and purchases already owned keep their owner. Returns the purchases
    /// this call claimed, in id order. `postedAt`: when the claim was posted (nil: now), kept as `acquired_at`,
    /// the instant later claims are weighed against.
    func claimUnowned(_ owners: [String: String], postedAt: Date? = nil, on db: some PostgresQueryable) async throws -> [String] {
        let claims = owners.sorted { $0.key < $1.key }
        return try await db.query("""
            INSERT INTO purchase_owners (original_transaction_id, user_id, acquired_at)
            SELECT id, user_id, coalesce($3, now()) FROM unnest($1::text[], $2::text[]) AS c(id, user_id)
            ON CONFLICT (original_transaction_id) DO NOTHING
            RETURNING original_transaction_id
            """, [claims.map(\.key), claims.map(\.value), postedAt]).rows.map { try $0.string("original_transaction_id") }.sorted()
    }

    /// The users owning a purchase with a transaction of `productID`: those whose entitlements the product's
    /// catalog entry decides.
    func owners(ofProduct productID: String, on db: some PostgresQueryable) async throws -> Set<String> {
        Set(try await db.query("""
            SELECT DISTINCT o.user_id FROM purchase_owners o
             WHERE o.original_transaction_id IN (SELECT original_transaction_id FROM app_store_transactions WHERE product_id = $1)
            """, [productID]).rows.map { try $0.string("user_id") })
    }

    /// The owners of those of `originalTransactionIDs` that have one.
    func owners(of originalTransactionIDs: [String], on db: some PostgresQueryable) async throws -> [String: String] {
        guard !originalTransactionIDs.isEmpty else { return [:] }
        let rows = try await db.query("""
            SELECT original_transaction_id, user_id FROM purchase_owners WHERE original_transaction_id = ANY($1)
            """, [originalTransactionIDs]).rows
        var owners: [String: String] = [:]
        for row in rows {
            owners[try row.string("original_transaction_id")] = try row.string("user_id")
        }
        return owners
    }

    /// The owner of the purchase transaction `transactionID` belongs to (through its original transaction), if
    /// it is stored and owned. Both steps are primary-key look-ups.
    func owner(ofTransaction transactionID: String, on db: some PostgresQueryable) async throws -> String? {
        try await db.query("""
            SELECT o.user_id FROM app_store_transactions t
              JOIN purchase_owners o ON o.original_transaction_id = t.original_transaction_id
             WHERE t.transaction_id = $1
            """, [transactionID]).rows.first.map { try $0.string("user_id") }
    }

    /// The owners of those of `originalTransactionIDs` that have one, with when each came to own it, their rows
    /// locked (in id order) until the caller's transaction ends.
    func lockedOwners(of originalTransactionIDs: [String], on db: some PostgresQueryable) async throws -> [String: (user: String, since: Date)] {
        guard !originalTransactionIDs.isEmpty else { return [:] }
        var owners: [String: (user: String, since: Date)] = [:]
        for row in try await db.query("""
            SELECT original_transaction_id, user_id, acquired_at FROM purchase_owners
             WHERE original_transaction_id = ANY($1)
             ORDER BY original_transaction_id
               FOR UPDATE
            """, [originalTransactionIDs]).rows {
            owners[try row.string("original_transaction_id")] = (try row.string("user_id"), try row.date("acquired_at"))
        }
        return owners
    }

    /// Their owners posted `originalTransactionIDs` again at `postedAt` (nil: now): their claims date from then.
    func renewClaims(_ originalTransactionIDs: [String], postedAt: Date?, on db: some PostgresQueryable) async throws {
        guard !originalTransactionIDs.isEmpty else { return }
        _ = try await db.query("""
            UPDATE purchase_owners SET acquired_at = greatest(acquired_at, coalesce($2, now()))
             WHERE original_transaction_id = ANY($1)
            """, [originalTransactionIDs, postedAt])
    }

    /// Moves a purchase to `userID`, whose claim was posted at `postedAt` (nil: now).
    func transfer(_ originalTransactionID: String, to userID: String, postedAt: Date?, on db: some PostgresQueryable) async throws {
        _ = try await db.query("""
            UPDATE purchase_owners SET user_id = $2, acquired_at = coalesce($3, now()) WHERE original_transaction_id = $1
            """, [originalTransactionID, userID, postedAt])
    }
}
