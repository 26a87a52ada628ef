import CCurl
import CUV

/// The libcurl multi handle driven by the uv loop: libcurl's socket-interest callback becomes one uv poll
/// per socket, its timer callback one uv timer, and every readiness or timeout goes back to libcurl through
/// `curl_multi_socket_action`, after which finished transfers are collected with `curl_multi_info_read`.
///
/// All transfers share its connection cache (idle connections are kept for reuse, up to
/// `CURLMOPT_MAXCONNECTS`) and a share handle that holds the DNS cache and the TLS session cache, so easy
/// handles made per request still resume sessions. Connections stay in the multi handle's cache rather
/// than the share handle's: with one multi handle every easy handle already shares it, and there the
/// connection limits apply. No thread, no `curl_easy_perform`: everything runs in loop callbacks.
@Loop
final class CurlMulti {
    let share: UnsafeMutableRawPointer
    private let multi: UnsafeMutableRawPointer
    private let timer = LoopTimer()
    /// Transfers whose easy handle is in the multi handle; this table owns them.
    private var running: [ObjectIdentifier: CurlTransfer] = [:]
    /// Open polls by socket; the same objects libcurl knows through `curl_multi_assign`.
    private var polls: [curl_socket_t: CurlSocketPoll] = [:]
    /// What the uv timer runs when libcurl's timeout expires; made once, not at every re-arm.
    private lazy var onTimeout: @Loop () -> Void = { [weak self] in
        self?.socketAction(ccurl_socket_timeout, flags: 0)
    }

    init(maxConnections: Int, maxHostConnections: Int) {
        precondition(Self.globalInit == CURLE_OK, "curl_global_init failed")
        guard let multi = curl_multi_init(), let share = curl_share_init() else {
            fatalError("libcurl could not allocate its multi or share handle")
        }
        self.multi = multi
        self.share = share
        ccurl_share_setopt_long(share, CURLSHOPT_SHARE, Int(CURL_LOCK_DATA_DNS.rawValue))
        ccurl_share_setopt_long(share, CURLSHOPT_SHARE, Int(CURL_LOCK_DATA_SSL_SESSION.rawValue))
        ccurl_multi_setopt_long(multi, CURLMOPT_MAXCONNECTS, maxConnections)
        ccurl_multi_setopt_long(multi, CURLMOPT_MAX_HOST_CONNECTIONS, maxHostConnections)
        ccurl_multi_setopt_long(multi, CURLMOPT_PIPELINING, 0)
        let this = Unmanaged.passUnretained(self).toOpaque()
        ccurl_multi_setopt_pointer(multi, CURLMOPT_SOCKETDATA, this)
        ccurl_multi_setopt_socket_callback(multi, Self.onSocket)
        ccurl_multi_setopt_pointer(multi, CURLMOPT_TIMERDATA, this)
        ccurl_multi_setopt_timer_callback(multi, Self.onTimer)
    }

    /// Runs only when no transfer is running (each holds its client, which holds this object). libcurl's
    /// callbacks are unset first, so closing idle connections does not call back into a dying object.
    isolated deinit {
        for poll in polls.values { poll.close() }
        ccurl_multi_setopt_socket_callback(multi, nil)
        ccurl_multi_setopt_timer_callback(multi, nil)
        curl_multi_cleanup(multi)
        let shared = curl_share_cleanup(share)
        if shared != CURLSHE_OK {
            Log.warning("curl_share_cleanup_failed", ["error": String(cString: curl_share_strerror(shared))])
        }
        timer.close()
    }

    /// Transfers in progress.
    var runningCount: Int { running.count }
    /// Sockets being watched for libcurl.
    var pollCount: Int { polls.count }

    /// Starts `transfer`; its outcome arrives through the continuation it holds.
    func add(_ transfer: CurlTransfer) {
        let code = curl_multi_add_handle(multi, transfer.easy)
        guard code == CURLM_OK else {
            transfer.resume(.failure(HTTPClientError(kind: .other, curlCode: 0, message: "curl_multi_add_handle: \(String(cString: curl_multi_strerror(code)))")))
            return
        }
        running[ObjectIdentifier(transfer)] = transfer
    }

    /// Abandons `transfer` if it still runs: its easy handle leaves the multi handle (closing its
    /// connection) and the awaiting task gets `.cancelled`.
    func cancel(_ transfer: CurlTransfer) {
        guard running.removeValue(forKey: ObjectIdentifier(transfer)) != nil else { return }
        curl_multi_remove_handle(multi, transfer.easy)
        transfer.resume(.failure(HTTPClientError(kind: .cancelled, curlCode: 0, message: "the awaiting task was cancelled")))
    }

    /// Tells libcurl that `socket` is ready (`flags` from a poll) or, for `ccurl_socket_timeout`, that its
    /// timer expired; then completes whatever finished.
    func socketAction(_ socket: curl_socket_t, flags: Int32) {
        var stillRunning: Int32 = 0
        let code = curl_multi_socket_action(multi, socket, flags, &stillRunning)
        if code != CURLM_OK {
            Log.error("curl_multi_socket_action_failed", ["error": String(cString: curl_multi_strerror(code))])
        }
        collectFinished()
    }

    /// Completes every transfer libcurl reports done.
    private func collectFinished() {
        var queued: Int32 = 0
        while let message = curl_multi_info_read(multi, &queued) {
            guard message.pointee.msg == CURLMSG_DONE, let easy = message.pointee.easy_handle else { continue }
            let code = ccurl_msg_result(message)
            var context: UnsafeMutableRawPointer?
            ccurl_easy_getinfo_pointer(easy, CURLINFO_PRIVATE, &context)
            guard let context else { continue }
            let transfer = Unmanaged<CurlTransfer>.fromOpaque(context).takeUnretainedValue()
            let outcome = transfer.outcome(code)
            running.removeValue(forKey: ObjectIdentifier(transfer))
            curl_multi_remove_handle(multi, easy)
            transfer.resume(outcome)
        }
    }

    /// libcurl's socket callback: carries out what `CurlSocketEvents` decides. Returns -1 to make libcurl
    /// fail the transfers on a socket that cannot be watched.
    private func socketInterest(_ socket: curl_socket_t, what: Int32, context: UnsafeMutableRawPointer?) -> Int32 {
        // `if let`, not `Optional.map`: a closure formed here would cost an executor query on every call.
        let existing: CurlSocketPoll? = if let context { Unmanaged<CurlSocketPoll>.fromOpaque(context).takeUnretainedValue() } else { nil }
        switch CurlSocketEvents.action(what: what, hasPoll: existing != nil) {
        case .start(let events):
            // A descriptor number libcurl announces afresh has no live poll; close a stale one defensively,
            // since libuv refuses a second poll on one descriptor.
            polls.removeValue(forKey: socket)?.close()
            guard let poll = CurlSocketPoll(socket: socket, multi: self) else { return -1 }
            polls[socket] = poll
            curl_multi_assign(multi, socket, Unmanaged.passUnretained(poll).toOpaque())
            return poll.start(events: events) ? 0 : -1
        case .update(let events):
            return existing?.start(events: events) == true ? 0 : -1
        case .pause:
            existing?.pause()
        case .close:
            existing?.close()
            polls[socket] = nil
        case .ignore:
            break
        }
        return 0
    }

    /// libcurl's timer callback: -1 disarms, otherwise time out after `timeoutMs` (0: on the next iteration;
    /// libcurl must not be re-entered from inside its own callback).
    private func rearm(timeoutMs: Int) {
        guard timeoutMs >= 0 else {
            timer.stop()
            return
        }
        timer.start(after: UInt64(timeoutMs), onTimeout)
    }

    // MARK: - C callbacks
    //
    // Outside the actor's isolation, so libcurl's calls cost no executor query (`Loop.assumeIsolated` checks).

    nonisolated private static let onSocket: ccurl_socket_callback = { _, socket, what, userp, socketp in
        guard let userp else { return -1 }
        let multi = Unmanaged<CurlMulti>.fromOpaque(userp).takeUnretainedValue()
        nonisolated(unsafe) let context = socketp
        return Loop.assumeIsolated { multi.socketInterest(socket, what: what, context: context) }
    }

    nonisolated private static let onTimer: ccurl_timer_callback = { _, timeoutMs, userp in
        guard let userp else { return -1 }
        let multi = Unmanaged<CurlMulti>.fromOpaque(userp).takeUnretainedValue()
        Loop.assumeIsolated { multi.rearm(timeoutMs: timeoutMs) }
        return 0
    }

    private static let globalInit = curl_global_init(ccurl_global_default)
}
