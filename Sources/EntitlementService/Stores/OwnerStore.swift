import ServiceRuntime

/// The `purchase_owners` table: who owns each purchase (an original transaction id and every transaction
/// sharing it). Rows are claimed and locked in id order in every transaction, so concurrent recordings cannot
/// deadlock on them.
@Loop
struct OwnerStore {
    /// Records owners for purchases nobody owns yet (`owners` maps original transaction ids to users); the
    /// unique key settles concurrent claims, and purchases already owned keep their owner.
    func claimUnowned(_ owners: [String: String], on db: some PostgresQueryable) async throws {
        let claims = owners.sorted { $0.key < $1.key }
        _ = try await db.query("""
            INSERT INTO purchase_owners (original_transaction_id, user_id)
            SELECT * FROM unnest($1, $2)
            ON CONFLICT (original_transaction_id) DO NOTHING
            """, [claims.map(\.key), claims.map(\.value)])
    }

    /// The owners of those of `originalTransactionIDs` that have one. With `locking`, their rows stay locked
    /// (in id order) until the caller's transaction ends.
    func owners(of originalTransactionIDs: [String], locking: Bool = false,
                on db: some PostgresQueryable) async throws -> [String: String] {
        let rows = try await db.query(locking ? """
            SELECT original_transaction_id, user_id FROM purchase_owners
             WHERE original_transaction_id = ANY($1)
             ORDER BY original_transaction_id
               FOR UPDATE
            """ : """
            SELECT original_transaction_id, user_id FROM purchase_owners WHERE original_transaction_id = ANY($1)
            """, [originalTransactionIDs]).rows
        var owners: [String: String] = [:]
        for row in rows {
            owners[try row.string("original_transaction_id")] = try row.string("user_id")
        }
        return owners
    }

    /// Moves a purchase to `userID`.
    func transfer(_ originalTransactionID: String, to userID: String, on db: some PostgresQueryable) async throws {
        _ = try await db.query("""
            UPDATE purchase_owners SET user_id = $2, acquired_at = now() WHERE original_transaction_id = $1
            """, [originalTransactionID, userID])
    }
}
