import CUV

/// The I/O shell of one accepted TCP connection: reads into the parser, feeds the state machine, and carries
/// out its actions with libuv (reads, writes, the timer, shutdown and close).
///
/// The uv handle's `data` holds a retained reference to this object from `start` until libuv's close
/// callback, which releases it and frees the handle.
@Loop
final class HTTPConnection: FinishBeforeWaiting {
    typealias Action = HTTPConnectionStateMachine.Action

    private let handle: UnsafeMutablePointer<uv_tcp_t>
    private let server: HTTPServer
    private let configuration: HTTPServerConfiguration
    private var machine: HTTPConnectionStateMachine
    private let parser: HTTPRequestParser
    private let timer = LoopTimer()
    /// When the machine's timer is due (loop clock, ms); nil while it is off.
    private var deadline: UInt64?
    /// When the uv timer will fire; nil while it is stopped. It is moved only when a deadline comes earlier
    /// (a request starting on an idle connection): a later or cancelled deadline is noticed when it fires,
    /// so most requests cost no timer call at all.
    private var timerDue: UInt64?
    /// Unowned, not weak: a weak reference would give the connection a side table, and every retain and
    /// release of it (several per request) would take the runtime's slow path. The timer drops this closure
    /// when the connection closes, before the connection can go away.
    private lazy var onTimer: @Loop () -> Void = { [unowned self] in self.timerFired() }

    /// The machine's actions not carried out yet, in order: one list for the connection's life, so events
    /// cost no allocation.
    private var actions: [Action] = []
    private var executing = false
    /// Answers serialized during this loop iteration. They are written together just before the loop waits
    /// for I/O again: one write, and at most one wake-up of the peer, per connection and iteration, however
    /// many answers (pipelined requests, batched database reads) an iteration finished.
    private var outgoing: [UInt8] = []
    /// How many answers `outgoing` holds; each completes one of the machine's writes.
    private var outgoingAnswers = 0
    /// How many answers each `uv_write` still in flight carries, oldest first.
    private var answersInFlight: [Int] = []
    /// Received bytes not parsed yet because the machine paused reading.
    private var buffered: [UInt8] = []
    private var drainNeeded = false
    private var parsing = false
    private var reading = false
    private var discarding = false
    private var closed = false
    /// The peer's address for the access log, asked of the socket once, when the first request is reported.
    private lazy var client: String = ListeningSocket.peerAddress(handle) ?? "-"

    /// Takes over `handle`, an initialized and accepted uv TCP handle.
    init(handle: UnsafeMutablePointer<uv_tcp_t>, server: HTTPServer, configuration: HTTPServerConfiguration) {
        self.handle = handle
        self.server = server
        self.configuration = configuration
        machine = HTTPConnectionStateMachine(configuration: .init(
            maxBodyBytes: configuration.maxBodyBytes, maxPendingRequests: configuration.maxPendingRequests,
            minBodyBytesPerSecond: configuration.minBodyBytesPerSecond, minBodyRateGraceMs: configuration.minBodyRateGraceMs))
        parser = HTTPRequestParser(limits: .init(maxHeaderBytes: configuration.maxHeaderBytes, maxHeaders: configuration.maxHeaders))
        handle.pointee.data = Unmanaged.passRetained(self).toOpaque()
    }

    /// Begins serving.
    func start() {
        machine.connected(into: &actions)
        runActions()
    }

    /// Answers 503 at once and closes politely (the server is at its connection limit).
    func refuse() {
        machine.refused(requestID: RequestID.generate(), into: &actions)
        runActions()
    }

    /// True for a keep-alive connection waiting between requests with nothing held (see the machine's).
    var isIdleBetweenRequests: Bool { machine.isIdleBetweenRequests }

    /// Closes this idle connection for a new one's sake (the server is at its connection limit).
    func reclaim() {
        machine.reclaimed(into: &actions)
        runActions()
    }

    /// Graceful shutdown: finish what was received, then close.
    func shutdown() {
        machine.shutdownRequested(into: &actions)
        runActions()
    }

    // MARK: - Carrying out actions

    /// Carries out the actions the machine appended, and those they lead to, in order; nothing when already
    /// doing so (an action that reports an event, e.g. a handler answering at once, only appends).
    private func runActions() {
        guard !executing else { return }
        executing = true
        var index = 0
        while index < actions.count {
            // Moved out, not copied: a copy would retain the request or response it carries.
            var action = Action.cancelTimer
            swap(&action, &actions[index])
            index += 1
            if !closed { execute(action) }
        }
        actions.removeAll(keepingCapacity: true)
        executing = false
        if drainNeeded {
            drainNeeded = false
            drainBuffered()
        }
    }

    private func execute(_ action: Action) {
        switch action {
        case .startReading:
            parsing = true
            startUVRead()
            drainNeeded = !buffered.isEmpty
        case .stopReading:
            parsing = false
            if reading {
                uv_read_stop(cuv_stream(handle))
                reading = false
            }
        case .startHandler(let request, _):
            startHandler(request)
        case .write(let response, let context):
            HTTPResponseSerializer.serialize(response, context: context, date: HTTPDate.now(), into: &outgoing)
            answerQueued()
        case .reject(let problem, let context):
            server.observe(HTTPExchange(requestID: context.requestID, client: client, method: context.method, route: HTTPServer.rejectedRoute,
                                        status: problem.status, detail: problem.detail))
            HTTPResponseSerializer.serialize(problem.response, context: context, date: HTTPDate.now(), into: &outgoing)
            answerQueued()
        case .writeContinue:
            outgoing.append(contentsOf: HTTPResponseSerializer.continueResponse)
            answerQueued()
        case .armTimer(let kind):
            let milliseconds = switch kind {
            case .request, .body, .drain: configuration.headerTimeoutMs
            case .idle: configuration.idleTimeoutMs
            case .linger: configuration.lingerTimeoutMs
            }
            let now = EventLoop.shared.now
            var due = now + UInt64(max(0, milliseconds))
            if case .body(let until) = kind { due = max(now, min(due, until)) }
            deadline = due
            if timerDue == nil || due < timerDue! {
                timerDue = due
                timer.start(after: due - now, onTimer)
            }
        case .cancelTimer:
            deadline = nil
        case .shutdownAndLinger:
            parsing = false
            discarding = true
            buffered = []
            startUVRead()
            let request = UnsafeMutablePointer<uv_shutdown_t>.allocate(capacity: 1)
            if uv_shutdown(request, cuv_stream(handle), Self.onShutdown) != 0 {
                request.deallocate()
                ioFailed()
            }
        case .close:
            close()
        }
    }

    private func startHandler(_ request: HTTPRequest) {
        let started = uv_hrtime()
        let (answer, route) = server.router.respond(to: request)
        switch answer {
        case .ready(let outcome):
            finish(request, outcome, route: route, started: started)
        case .pending(let work):
            Task.onLoop {
                let outcome = await Log.$requestID.withValue(request.requestID) { await work() }
                self.finish(request, outcome, route: route, started: started)
            }
        }
    }

    /// Reports the request to the server's observers, then hands its answer to the machine (an abort closes
    /// the connection unanswered). No closures here: one formed in `@Loop` code checks the executor when run.
    private func finish(_ request: HTTPRequest, _ outcome: HTTPOutcome, route: String, started: UInt64) {
        let response = try? outcome.get()
        server.observe(HTTPExchange(requestID: request.requestID, client: client, method: request.method, route: route,
                                    status: response?.status, nanoseconds: uv_hrtime() - started))
        if let response {
            machine.handlerFinished(response, into: &actions)
            runActions()
        } else {
            ioFailed()
        }
    }

    private func timerFired() {
        timerDue = nil
        guard let deadline else { return }
        let now = EventLoop.shared.now
        if now < deadline {
            timerDue = deadline
            timer.start(after: deadline - now, onTimer)
        } else {
            self.deadline = nil
            machine.timerFired(requestID: RequestID.generate(), into: &actions)
            runActions()
        }
    }

    // MARK: - Reading

    private func startUVRead() {
        guard !reading else { return }
        let status = uv_read_start(cuv_stream(handle), Self.onAlloc, Self.onRead)
        if status == 0 {
            reading = true
        } else {
            ioFailed()
        }
    }

    private func didRead(_ count: Int, _ base: UnsafeRawPointer?) {
        guard !closed else { return }
        if count > 0, let base {
            guard !discarding else { return }
            let bytes = UnsafeRawBufferPointer(start: base, count: count)
            if parsing && buffered.isEmpty {
                feed(bytes)
            } else {
                buffered.append(contentsOf: bytes)
                if parsing { drainBuffered() }
            }
        } else if count == Int(UV_EOF.rawValue) {
            machine.peerEnded(into: &actions)
            runActions()
        } else if count < 0 {
            ioFailed()
        }
    }

    /// Parses `bytes` request by request while the machine wants input; keeps the rest for later.
    private func feed(_ bytes: UnsafeRawBufferPointer) {
        var offset = 0
        while offset < bytes.count && parsing && !closed {
            let (consumed, events) = parser.parse(UnsafeRawBufferPointer(rebasing: bytes[offset...]))
            offset += consumed
            for event in events {
                deliver(event)
            }
            if consumed == 0 && events.isEmpty { break }
        }
        if offset < bytes.count && !discarding && !closed {
            buffered.append(contentsOf: bytes[offset...])
        }
    }

    private func drainBuffered() {
        guard parsing, !buffered.isEmpty else { return }
        let pending = buffered
        buffered = []
        Self.feed(self, pending)
    }

    /// Feeds `bytes` to `connection` from outside the actor's isolation: a closure formed inside an `@Loop`
    /// method would ask the concurrency runtime which executor is current.
    nonisolated private static func feed(_ connection: HTTPConnection, _ bytes: [UInt8]) {
        bytes.withUnsafeBytes { raw in
            nonisolated(unsafe) let raw = raw
            Loop.assumeIsolated { connection.feed(raw) }
        }
    }

    private func deliver(_ event: HTTPParserEvent) {
        switch event {
        case .messageBegin:
            machine.messageBegin(into: &actions)
        case .head(let head):
            machine.receivedHead(head, at: EventLoop.shared.now, into: &actions)
        case .body(let bytes):
            machine.receivedBody(bytes, into: &actions)
        case .end:
            machine.receivedEnd(into: &actions)
        case .failure(let failure, let requestID, let method):
            machine.parseFailed(failure, requestID: requestID, method: method, into: &actions)
        }
        runActions()
    }

    /// Reading or writing failed: the machine closes the connection.
    private func ioFailed() {
        machine.ioFailed(into: &actions)
        runActions()
    }

    // MARK: - Writing

    private func answerQueued() {
        outgoingAnswers += 1
        if outgoingAnswers == 1 {
            EventLoop.shared.finishBeforeWaiting(self)
        }
    }

    /// Writes the answers queued this iteration: straight to the socket when it takes them all, else through
    /// `uv_write` with a copy of the rest that lives until the write callback.
    func finishBeforeWaiting() {
        guard !closed, outgoingAnswers > 0 else { return }
        let answers = outgoingAnswers
        outgoingAnswers = 0
        let written = Self.tryWrite(handle, outgoing)
        if Int(written) == outgoing.count {
            outgoing.removeAll(keepingCapacity: outgoing.capacity <= Self.keptOutgoingCapacity)
            completeWrites(answers, status: 0)
            return
        }
        guard written >= 0 || written == UV_EAGAIN.rawValue else {
            outgoing = []
            ioFailed()
            return
        }
        let rest = outgoing.count - Int(max(written, 0))
        let copy = Self.copyTail(of: outgoing, from: Int(max(written, 0)))
        outgoing = []
        let request = UnsafeMutablePointer<uv_write_t>.allocate(capacity: 1)
        request.pointee.data = copy
        var buffer = uv_buf_init(copy.assumingMemoryBound(to: CChar.self), UInt32(rest))
        let status = uv_write(request, cuv_stream(handle), &buffer, 1, Self.onWrite)
        if status != 0 {
            copy.deallocate()
            request.deallocate()
            ioFailed()
        } else {
            answersInFlight.append(answers)
        }
    }

    /// The largest answer buffer a connection keeps between iterations (an entitlements answer fits); a bigger
    /// one is given back, so thousands of idle keep-alive connections hold at most this much each.
    private static let keptOutgoingCapacity = 4 << 10

    /// `uv_try_write`: how many bytes the socket took at once, or a negative libuv error.
    nonisolated private static func tryWrite(_ handle: UnsafeMutablePointer<uv_tcp_t>, _ bytes: [UInt8]) -> Int32 {
        bytes.withUnsafeBytes { raw in
            var buffer = uv_buf_init(UnsafeMutablePointer(mutating: raw.baseAddress!.assumingMemoryBound(to: CChar.self)), UInt32(raw.count))
            return uv_try_write(cuv_stream(handle), &buffer, 1)
        }
    }

    /// A fresh allocation holding `bytes[offset...]`; the caller deallocates it.
    nonisolated private static func copyTail(of bytes: [UInt8], from offset: Int) -> UnsafeMutableRawPointer {
        let copy = UnsafeMutableRawPointer.allocate(byteCount: bytes.count - offset, alignment: 1)
        bytes.withUnsafeBytes { copy.copyMemory(from: $0.baseAddress! + offset, byteCount: bytes.count - offset) }
        return copy
    }

    private func didWrite(_ status: Int32) {
        completeWrites(answersInFlight.removeFirst(), status: status)
    }

    private func completeWrites(_ answers: Int, status: Int32) {
        guard status == 0 else {
            ioFailed()
            return
        }
        for _ in 0..<answers {
            machine.writeCompleted(into: &actions)
            runActions()
        }
    }

    // MARK: - Closing

    private func close() {
        guard !closed else { return }
        closed = true
        parsing = false
        buffered = []
        outgoing = []
        outgoingAnswers = 0
        timer.close()
        uv_close(cuv_handle(handle), Self.onClose)
    }

    // MARK: - C callbacks
    //
    // Declared outside the actor's isolation: libuv calls them on the loop thread, and `Loop.assumeIsolated`
    // checks that cheaply, where a closure formed inside an `@Loop` method would ask the concurrency runtime
    // which executor is current on every call.

    nonisolated private static let onAlloc: uv_alloc_cb = { _, _, buffer in
        buffer?.pointee = uv_buf_init(readBuffer, UInt32(readBufferSize))
    }

    nonisolated private static let onRead: uv_read_cb = { stream, count, buffer in
        guard let stream, let data = stream.pointee.data else { return }
        EventLoop.shared.checkIsolated()
        let connection = Unmanaged<HTTPConnection>.fromOpaque(data).takeUnretainedValue()
        didRead((connection, count, UnsafeRawPointer(buffer?.pointee.base)))
    }

    nonisolated private static let didRead = Loop.callable { (read: (HTTPConnection, Int, UnsafeRawPointer?)) in
        read.0.didRead(read.1, read.2)
    }

    nonisolated private static let onWrite: uv_write_cb = { request, status in
        guard let request else { return }
        request.pointee.data.deallocate()
        let data = request.pointee.handle.pointee.data
        request.deallocate()
        guard let data else { return }
        let connection = Unmanaged<HTTPConnection>.fromOpaque(data).takeUnretainedValue()
        Loop.assumeIsolated { connection.didWrite(status) }
    }

    nonisolated private static let onShutdown: uv_shutdown_cb = { request, _ in
        request?.deallocate()
    }

    nonisolated private static let onClose: uv_close_cb = { handle in
        guard let handle else { return }
        let connection = Unmanaged<HTTPConnection>.fromOpaque(handle.pointee.data).takeRetainedValue()
        handle.deallocate()
        Loop.assumeIsolated { connection.server.connectionClosed(connection) }
    }

    // MARK: - Shared read buffer

    nonisolated private static let readBufferSize = 64 << 10
    /// One buffer serves every connection's reads: the loop hands it to one read callback at a time, and
    /// the callback parses or copies what it got before returning.
    nonisolated(unsafe) private static let readBuffer = UnsafeMutablePointer<CChar>.allocate(capacity: readBufferSize)
}
