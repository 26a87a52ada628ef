extension LoopTimer {
    /// `operation`'s value, or nil when `milliseconds` pass first or `interrupt` ends the wait: it is handed a
    /// closure that does (to keep, say, for a shutdown). The operation goes on regardless; only the wait ends.
    public static func value<T: Sendable>(of operation: @escaping @Loop () async -> T, waitingAtMost milliseconds: UInt64,
                                interrupt: (@escaping @Loop () -> Void) -> Void = { _ in }) async -> T? {
        let once = WaitOnce(), timer = LoopTimer()
        defer { timer.close() }
        return await withCheckedContinuation { (continuation: CheckedContinuation<T?, Never>) in
            let finish: @Loop (T?) -> Void = { value in
                guard !once.resumed else { return }
                once.resumed = true
                continuation.resume(returning: value)
            }
            interrupt { finish(nil) }
            timer.start(after: milliseconds) { finish(nil) }
            Task.onLoop { finish(await operation()) }
        }
    }
}

/// Whether a wait of `LoopTimer.value(of:waitingAtMost:interrupt:)` has ended: it ends once, whoever ends it.
@Loop
private final class WaitOnce {
    var resumed = false
}
