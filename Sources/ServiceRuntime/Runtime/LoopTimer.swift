import CUV

/// A libuv timer owned by Swift code on the loop.
///
/// The uv handle holds a retained reference to its timer from `init` until libuv's close callback, which
/// releases it and frees the handle memory; `close()` must be called exactly once when the owner is done.
@Loop
public final class LoopTimer {
    private let handle: UnsafeMutablePointer<uv_timer_t>
    private var action: (@Loop () -> Void)?
    private var closed = false

    /// An unarmed timer on `EventLoop.shared`; it keeps itself alive until `close()`.
    public init() {
        handle = .allocate(capacity: 1)
        uv_timer_init(EventLoop.shared.uv, handle)
        handle.pointee.data = Unmanaged.passRetained(self).toOpaque()
    }

    /// Arms the timer: `action` runs once after `milliseconds`, then every `repeatMilliseconds` when non-zero.
    /// Re-arming replaces the previous schedule.
    public func start(after milliseconds: UInt64, repeat repeatMilliseconds: UInt64 = 0, _ action: @escaping @Loop () -> Void) {
        guard !closed else { return }
        self.action = action
        uv_timer_start(handle, Self.onFire, milliseconds, repeatMilliseconds)
    }

    /// Disarms the timer; it may be started again.
    public func stop() {
        guard !closed else { return }
        uv_timer_stop(handle)
        action = nil
    }

    /// Stops the timer for good; the handle is freed in libuv's close callback.
    public func close() {
        guard !closed else { return }
        closed = true
        action = nil
        uv_timer_stop(handle)
        uv_close(cuv_handle(handle), UVHandleClose.releaseAndFree)
    }

    // Outside the actor's isolation, so libuv's calls cost no executor query (`Loop.assumeIsolated` checks).
    nonisolated private static let onFire: uv_timer_cb = { handle in
        guard let data = handle?.pointee.data else { return }
        let timer = Unmanaged<LoopTimer>.fromOpaque(data).takeUnretainedValue()
        Loop.assumeIsolated { timer.action?() }
    }

    /// Suspends the calling task for `milliseconds` on a uv timer.
    public static func sleep(milliseconds: UInt64) async {
        let timer = LoopTimer()
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            timer.start(after: milliseconds) { continuation.resume() }
        }
        timer.close()
    }
}
