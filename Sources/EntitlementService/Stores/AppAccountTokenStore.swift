import ServiceRuntime
import Foundation

/// The app account tokens this service issues: each user's stable token (`app_account_tokens`) and each server
/// order's (`orders`). A purchase carrying one belongs to that token's user, whoever posts it.
@Loop
struct AppAccountTokenStore {
    /// The user's token, created on first use. Two first calls at once agree: the user's unique key settles
    /// which insert wins, and the loser reads the winner's row in a statement of its own.
    func token(for userID: String, on db: some PostgresQueryable) async throws -> UUID {
        if let created = try await db.query("""
            INSERT INTO app_account_tokens (user_id) VALUES ($1)
            ON CONFLICT (user_id) DO NOTHING
            RETURNING app_account_token
            """, [userID]).rows.first {
            return try created.uuid("app_account_token")
        }
        return try await db.query("SELECT app_account_token FROM app_account_tokens WHERE user_id = $1", [userID])
            .single().uuid("app_account_token")
    }

    /// The users of those of `tokens` this service issued, to a user or with an order.
    func users(of tokens: Set<UUID>, on db: some PostgresQueryable) async throws -> [UUID: String] {
        guard !tokens.isEmpty else { return [:] }
        var users: [UUID: String] = [:]
        for row in try await db.query("""
            SELECT app_account_token, user_id FROM app_account_tokens WHERE app_account_token = ANY($1)
            UNION ALL
            SELECT app_account_token, user_id FROM orders WHERE app_account_token = ANY($1)
            """, [Array(tokens)]).rows {
            users[try row.uuid("app_account_token")] = try row.string("user_id")
        }
        return users
    }
}
