import ServiceRuntime

extension EntitlementCache {
    /// Returns once every change committed before the call has reached this cache, so a request that changed
    /// data can answer knowing its own change is visible to the next read on this instance; with copies sharing
    /// the address (`writes`), the write is counted first, and copies that have not heard its token yet do
    /// not serve meanwhile.
    ///
    /// It sends a fresh token on `syncChannel` through the pool and waits for the listener to hear it back:
    /// PostgreSQL delivers notifications in commit order, so by then the notifications of every earlier commit
    /// have been handled. If the token cannot be sent, or does not come back within `barrierTimeoutMs`, the
    /// cache is cleared instead. A cache that is not serving has nothing to bring up to date (but its copies'
    /// caches still hear the count).
    func barrier() async {
        guard capacity > 0 else { return }  // no process of this address caches anything
        let count = writes?.increment()
        guard isServing || count != nil else { return }
        barriers += 1
        await sync(count: count)
    }

    /// Sends a token carrying `count` (of `writes`) and, while the cache serves, waits to hear it back;
    /// clears the cache when it cannot be sent or does not come back in time.
    func sync(count: UInt64?) async {
        let token = nextToken(count: count)
        let waits = isServing
        if waits { syncs.expect(token) }
        do {
            try await ChangeNotificationStore().announceSync(token, on: db)
        } catch {
            syncs.forget(token)
            Log.warning("entitlement_cache_barrier_failed", ["error": (error as? PostgresError)?.message ?? "\(error)"])
            clear()
            return
        }
        guard waits else { return }
        guard await syncs.wait(for: token, timeoutMs: barrierTimeoutMs) else {
            if isServing { Log.warning("entitlement_cache_barrier_timeout", ["timeout_ms": barrierTimeoutMs]) }
            clear()
            return
        }
    }
}
