import CUV

/// Watches a POSIX signal on the loop with `uv_signal`, so the handler runs as ordinary `@Loop` code.
///
/// The handle keeps a retained reference to its watcher until libuv's close callback releases it.
@Loop
public final class SignalWatcher {
    private let handle: UnsafeMutablePointer<uv_signal_t>
    private let action: @Loop (Int32) -> Void
    private var closed = false

    /// Starts watching `signal`; `action` runs on the loop each time it arrives.
    public init(signal: Int32, _ action: @escaping @Loop (Int32) -> Void) {
        self.action = action
        handle = .allocate(capacity: 1)
        uv_signal_init(EventLoop.shared.uv, handle)
        handle.pointee.data = Unmanaged.passRetained(self).toOpaque()
        uv_signal_start(handle, Self.onSignal, signal)
    }

    /// Stops watching; the handle is freed in libuv's close callback.
    public func close() {
        guard !closed else { return }
        closed = true
        uv_signal_stop(handle)
        uv_close(cuv_handle(handle), UVHandleClose.releaseAndFree)
    }

    // Outside the actor's isolation, so libuv's calls cost no executor query (`Loop.assumeIsolated` checks).
    nonisolated private static let onSignal: uv_signal_cb = { handle, signum in
        guard let data = handle?.pointee.data else { return }
        let watcher = Unmanaged<SignalWatcher>.fromOpaque(data).takeUnretainedValue()
        Loop.assumeIsolated { watcher.action(signum) }
    }
}
