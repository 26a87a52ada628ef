import CUV

/// A `uv_poll` handle on libpq's socket.
///
/// The handle holds a retained reference to its watcher from `init` until libuv's close callback, which
/// releases it and frees the handle memory. `close()` stops polling at once, so it must be called before the
/// socket is closed (before `PQfinish`), and exactly once.
@Loop
final class PostgresSocketWatcher {
    /// What the socket reported.
    enum Readiness {
        /// `failed`: an error condition on the socket (POLLERR); libuv has stopped polling.
        case readable, writable, failed
    }

    /// The socket this handle polls; a new socket needs a new watcher.
    let socket: Int32
    private let handle: UnsafeMutablePointer<uv_poll_t>
    private var interest: PostgresConnectionStateMachine.Interest = .none
    private var onReady: (@Loop (Readiness) -> Void)?
    private var closed = false

    /// Starts a watcher on `socket` that reports to `onReady`; `nil` when libuv refuses the socket.
    init?(socket: Int32, onReady: @escaping @Loop (Readiness) -> Void) {
        self.socket = socket
        handle = .allocate(capacity: 1)
        guard uv_poll_init_socket(EventLoop.shared.uv, handle, socket) == 0 else {
            handle.deallocate()
            return nil
        }
        self.onReady = onReady
        handle.pointee.data = Unmanaged.passRetained(self).toOpaque()
    }

    /// Polls for `interest`; `.none` stops polling. Unchanged interest costs nothing.
    func watch(_ interest: PostgresConnectionStateMachine.Interest) {
        guard !closed, interest != self.interest else { return }
        self.interest = interest
        let events: Int32 = switch interest {
        case .none: 0
        case .read: Int32(UV_READABLE.rawValue)
        case .write: Int32(UV_WRITABLE.rawValue)
        case .readWrite: Int32(UV_READABLE.rawValue | UV_WRITABLE.rawValue)
        }
        if events == 0 {
            uv_poll_stop(handle)
            return
        }
        uv_poll_start(handle, events, Self.onPoll)
    }

    /// Stops polling now and frees the handle in libuv's close callback.
    func close() {
        guard !closed else { return }
        closed = true
        onReady = nil
        uv_close(cuv_handle(handle), UVHandleClose.releaseAndFree)
    }

    /// Reports readable before writable: with a flush pending, libpq wants input consumed first.
    private func report(status: Int32, events: Int32) {
        if status < 0 {
            interest = .none  // libuv stops the handle when it reports an error
            onReady?(.failed)
            return
        }
        if events & Int32(UV_READABLE.rawValue) != 0 { onReady?(.readable) }
        if events & Int32(UV_WRITABLE.rawValue) != 0 { onReady?(.writable) }
    }

    // Outside the actor's isolation, so libuv's calls cost no executor query (`Loop.assumeIsolated` checks).
    nonisolated private static let onPoll: uv_poll_cb = { handle, status, events in
        guard let data = handle?.pointee.data else { return }
        let watcher = Unmanaged<PostgresSocketWatcher>.fromOpaque(data).takeUnretainedValue()
        Loop.assumeIsolated { watcher.report(status: status, events: events) }
    }
}
