import CCurl
import CUV

/// The uv poll watching one socket on libcurl's behalf.
///
/// The uv handle's `data` holds a retained reference from `init` until libuv's close callback, which
/// releases it and frees the handle; libcurl's per-socket pointer (`curl_multi_assign`) borrows the same
/// object. `close()` runs when libcurl says `CURL_POLL_REMOVE`, i.e. before libcurl closes the socket, so
/// the poll never watches a closed descriptor.
@Loop
final class CurlSocketPoll {
    let socket: curl_socket_t
    private let handle: UnsafeMutablePointer<uv_poll_t>
    private unowned let multi: CurlMulti
    private var closed = false

    /// A poll for `socket`, or nil when libuv refuses the descriptor (the uv error is in the log).
    init?(socket: curl_socket_t, multi: CurlMulti) {
        let handle = UnsafeMutablePointer<uv_poll_t>.allocate(capacity: 1)
        let status = uv_poll_init_socket(EventLoop.shared.uv, handle, socket)
        guard status == 0 else {
            handle.deallocate()
            Log.error("curl_poll_init_failed", ["socket": socket, "error": String(cString: uv_strerror(status))])
            return nil
        }
        self.socket = socket
        self.handle = handle
        self.multi = multi
        handle.pointee.data = Unmanaged.passRetained(self).toOpaque()
    }

    /// Watches for `events` (`UV_READABLE`/`UV_WRITABLE`), replacing what was watched before.
    func start(events: Int32) -> Bool {
        guard !closed else { return false }
        let status = uv_poll_start(handle, events, Self.onPoll)
        if status != 0 {
            Log.error("curl_poll_start_failed", ["socket": socket, "error": String(cString: uv_strerror(status))])
        }
        return status == 0
    }

    /// Stops watching; `start` may resume.
    func pause() {
        guard !closed else { return }
        uv_poll_stop(handle)
    }

    /// Stops the poll for good; libuv frees the handle and drops the retain in its close callback.
    func close() {
        guard !closed else { return }
        closed = true
        uv_poll_stop(handle)
        uv_close(cuv_handle(handle), UVHandleClose.releaseAndFree)
    }

    private func fired(status: Int32, events: Int32) {
        multi.socketAction(socket, flags: CurlSocketEvents.curlFlags(status: status, events: events))
    }

    // Outside the actor's isolation, so libuv's calls cost no executor query (`Loop.assumeIsolated` checks).
    nonisolated private static let onPoll: uv_poll_cb = { handle, status, events in
        guard let data = handle?.pointee.data else { return }
        let poll = Unmanaged<CurlSocketPoll>.fromOpaque(data).takeUnretainedValue()
        Loop.assumeIsolated { poll.fired(status: status, events: events) }
    }
}
