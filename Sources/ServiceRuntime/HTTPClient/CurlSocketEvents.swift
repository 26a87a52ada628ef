import CCurl
import CUV

/// What the I/O shell does with a socket's uv poll after libcurl's socket callback reports its interest.
enum CurlSocketPollAction: Equatable {
    /// Create a poll for the socket, hand it to libcurl with `curl_multi_assign`, and start it for `events`.
    case start(events: Int32)
    /// Restart the socket's poll for `events` (a uv event mask).
    case update(events: Int32)
    /// Keep the poll but stop watching: libcurl wants nothing from the socket for now.
    case pause
    /// Stop and close the poll now, before libcurl closes the socket.
    case close
    /// Nothing to do.
    case ignore
}

/// The two translations between libcurl's socket vocabulary and libuv's poll events, kept pure for tests.
enum CurlSocketEvents {
    /// The poll action for libcurl's `what` (`CURL_POLL_*`) on a socket that has (`hasPoll`) or lacks a poll.
    static func action(what: Int32, hasPoll: Bool) -> CurlSocketPollAction {
        let events = pollEvents(what: what)
        switch (what, hasPoll) {
        case (CURL_POLL_REMOVE, true): return .close
        case (CURL_POLL_REMOVE, false): return .ignore
        case (_, false): return events == 0 ? .ignore : .start(events: events)
        case (_, true): return events == 0 ? .pause : .update(events: events)
        }
    }

    /// The `CURL_CSELECT_*` flags to pass to `curl_multi_socket_action` for one poll callback.
    /// A negative `status` is a poll error, which libcurl learns as `CURL_CSELECT_ERR`.
    static func curlFlags(status: Int32, events: Int32) -> Int32 {
        guard status >= 0 else { return CURL_CSELECT_ERR }
        var flags: Int32 = 0
        if events & readable != 0 || events & disconnect != 0 { flags |= CURL_CSELECT_IN }
        if events & writable != 0 { flags |= CURL_CSELECT_OUT }
        return flags
    }

    private static func pollEvents(what: Int32) -> Int32 {
        switch what {
        case CURL_POLL_IN: readable
        case CURL_POLL_OUT: writable
        case CURL_POLL_INOUT: readable | writable
        default: 0
        }
    }

    static let readable = Int32(UV_READABLE.rawValue)
    static let writable = Int32(UV_WRITABLE.rawValue)
    static let disconnect = Int32(UV_DISCONNECT.rawValue)
}
