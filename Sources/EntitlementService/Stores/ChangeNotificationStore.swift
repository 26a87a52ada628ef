import ServiceRuntime

/// The change-notification channels' one statement outside the triggers: a barrier's token.
@Loop
struct ChangeNotificationStore {
    /// Sends `token` on `EntitlementCache.syncChannel`; it reaches every listener after the notifications of
    /// everything committed before.
    func announceSync(_ token: String, on db: some PostgresQueryable) async throws {
        _ = try await db.query("SELECT pg_notify($1, $2)", [EntitlementCache.syncChannel, token])
    }
}
