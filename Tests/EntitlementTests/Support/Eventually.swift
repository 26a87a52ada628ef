import ServiceRuntime

/// Polls `condition` on the loop every `everyMs` until it holds or `timeout` seconds have passed; whether it
/// held. For conditions only polling can see (another process's log, a database view).
@Loop
func eventually(timeout: Double, everyMs: UInt64 = 20, _ condition: @Loop () async throws -> Bool) async rethrows -> Bool {
    let deadline = RawHTTPClient.now() + timeout
    while true {
        if try await condition() { return true }
        if RawHTTPClient.now() >= deadline { return false }
        await LoopTimer.sleep(milliseconds: everyMs)
    }
}
