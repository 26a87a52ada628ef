/// The HTTP/1.1 protocol logic of one server connection, free of I/O: events in, actions out.
///
/// The connection shell feeds it what happened (parser events, handler results, write completions, timer
/// expiries, end of input) and carries out the actions it appends to the shell's list (`into:`), in order: the
/// shell keeps one list for the connection's life, so an event costs no allocation. Requests are answered strictly
/// in the order they arrived, one handler at a time; later pipelined requests are parsed ahead but only up to
/// `maxPendingRequests`, after which reading stops until the backlog shrinks.
///
/// Ending a connection: after `Connection: close`, a rejected request, a timeout or a graceful shutdown the
/// machine stops reading, answers what it already holds, then shuts down its sending side and keeps
/// discarding input for a while ("lingering close") so the peer reads the last answer instead of a reset. A
/// graceful shutdown that finds a request half received reads that one request to its end first (within one
/// request timeout from the shutdown, else 408), and answers it as the connection's last.
struct HTTPConnectionStateMachine {
    struct Configuration: Equatable {
        /// Largest accepted request body.
        var maxBodyBytes: Int
        /// Requests received, running or being written before reading pauses (between requests: a body begun
        /// is read whole).
        var maxPendingRequests: Int
        /// The slowest a body may arrive on average since its head, once ``minBodyRateGraceMs`` has passed
        /// (bytes per second; 0: any rate).
        var minBodyBytesPerSecond: Int = 0
        var minBodyRateGraceMs: Int = 0
    }

    /// The connection's single timer.
    enum TimerKind: Equatable {
        /// A request (or the first one on a new connection) must arrive completely: the head within the
        /// header timeout of its start, and a body's first piece within that timeout of the head.
        case request
        /// The body, once a piece of it arrived, must keep arriving: each piece within the header timeout of the
        /// previous one, and at the minimum rate since the head, which it falls behind at `until` (loop clock, ms)
        /// unless more arrives first.
        case body(until: UInt64)
        /// Keep-alive: nothing is happening; the client may send another request.
        case idle
        /// The server shuts down: the request being received must arrive completely within the header timeout
        /// of the shutdown, however its body keeps coming.
        case drain
        /// The last answer is out; waiting for the peer to close.
        case linger
    }

    /// How to frame one response: the request it answers and whether the connection stays open after it.
    struct ResponseContext: Equatable, Sendable {
        var requestID: String
        /// The request's method, `-` when the request was unreadable before its method.
        var method: String
        var version: HTTPVersion
        var keepAlive: Bool
    }

    enum Action: Equatable {
        /// Read from the socket and parse: first any bytes already buffered, then new ones.
        case startReading
        /// Stop reading; stop parsing after the current request.
        case stopReading
        /// Run the route handler; report its response with `handlerFinished`.
        case startHandler(HTTPRequest, ResponseContext)
        /// Serialize and write a handler's response; report completion with `writeCompleted`.
        case write(HTTPResponse, ResponseContext)
        /// Write the problem as the connection's last response; report completion with `writeCompleted`.
        case reject(ProblemError, ResponseContext)
        /// Write `100 Continue`; report completion with `writeCompleted`.
        case writeContinue
        /// (Re)start the timer.
        case armTimer(TimerKind)
        case cancelTimer
        /// Send FIN, then read and drop whatever arrives until the peer closes or the linger timer fires.
        case shutdownAndLinger
        /// Close the socket now.
        case close
    }

    private enum Input {
        /// Between requests.
        case idle
        /// A request began; its head is incomplete.
        case head
        /// Reading the body of this head, whose end arrived at `since` (loop clock, ms).
        case body(HTTPRequestHead, [UInt8], since: UInt64)
        /// No more requests are taken on this connection.
        case ignoring
    }

    private enum Work {
        case request(HTTPRequest, ResponseContext)
        case rejection(ProblemError, ResponseContext)
    }

    private enum Lifecycle {
        case open
        /// Shutting down: reading the one request being received to its end, then closing as `closing` does.
        case draining
        /// Taking no new requests; closing once everything held is answered.
        case closing
        case lingering
        case closed
    }

    private let configuration: Configuration
    private var input = Input.idle
    private var lifecycle = Lifecycle.open
    private var queue: [Work] = []
    private var running: ResponseContext?
    private var writesInFlight = 0
    private var readingStopped = true
    private var timer: TimerKind?
    private var anyRequestBegun = false
    private var peerClosed = false

    init(configuration: Configuration) {
        self.configuration = configuration
    }

    // MARK: - Events

    /// A new connection was accepted and may be served.
    mutating func connected(into actions: inout [Action]) {
        setReading(true, &actions)
        updateTimer(&actions)
    }

    /// A new connection was accepted over the connection limit: answer 503 (`Retry-After` one second) and
    /// close politely.
    mutating func refused(requestID: String, into actions: inout [Action]) {
        let problem = ProblemError.unavailable("The server is at its connection limit; retry shortly.", retryAfterSeconds: 1)
        reject(problem, ResponseContext(requestID: requestID, method: "-", version: .http1_1, keepAlive: false), &actions)
    }

    /// The first byte of a request arrived.
    mutating func messageBegin(into actions: inout [Action]) {
        guard lifecycle == .open, case .idle = input else { return }
        input = .head
        anyRequestBegun = true
        updateTimer(&actions)
    }

    /// The request's head is complete, at `now` (loop clock, ms): the body's clock starts.
    mutating func receivedHead(_ head: HTTPRequestHead, at now: UInt64, into actions: inout [Action]) {
        guard receiving, case .head = input else { return }
        if let length = head.contentLength, length > configuration.maxBodyBytes {
            reject(Self.bodyTooLarge(configuration.maxBodyBytes), Self.context(head), &actions)
            return
        }
        input = .body(head, [], since: now)
        if head.expectsContinue && queue.isEmpty && running == nil {
            writesInFlight += 1
            actions.append(.writeContinue)
        }
        // Reading may have paused while this head was parsed; a body begun is read whole. The `request` timer
        // runs on until a first piece arrives, so a request without a body (most) arms nothing here.
        applyBackpressure(&actions)
    }

    /// A piece of the body arrived.
    mutating func receivedBody(_ bytes: [UInt8], into actions: inout [Action]) {
        guard receiving, case .body(let head, var body, let since) = input else { return }
        input = .ignoring  // drop the enum's reference so the append below does not copy the body
        guard body.count + bytes.count <= configuration.maxBodyBytes else {
            reject(Self.bodyTooLarge(configuration.maxBodyBytes), Self.context(head), &actions)
            return
        }
        body.append(contentsOf: bytes)
        input = .body(head, body, since: since)
        // Re-armed even when the rate's instant stays: each piece restarts the pause limit (not while draining,
        // whose one deadline stands).
        guard lifecycle == .open else { return }
        timer = .body(until: bodyDeadline(since: since, received: body.count))
        actions.append(.armTimer(timer!))
    }

    /// The request is complete.
    mutating func receivedEnd(into actions: inout [Action]) {
        guard receiving, case .body(let head, let body, _) = input else { return }
        input = .idle
        queue.append(.request(HTTPRequest(head: head, body: body), Self.context(head)))
        if !head.keepAlive || lifecycle == .draining {
            beginClosing(&actions)
        }
        advance(&actions)
    }

    /// The input is not an acceptable request.
    mutating func parseFailed(_ failure: HTTPParseFailure, requestID: String, method: String?, into actions: inout [Action]) {
        guard receiving else { return }
        let version: HTTPVersion
        if case .body(let head, _, _) = input { version = head.version } else { version = .http1_1 }
        reject(failure.problem, ResponseContext(requestID: requestID, method: method ?? "-", version: version, keepAlive: false), &actions)
    }

    /// The handler of the running request answered.
    mutating func handlerFinished(_ response: HTTPResponse, into actions: inout [Action]) {
        guard receiving || lifecycle == .closing, var context = running else { return }
        running = nil
        context.keepAlive = context.keepAlive && (receiving || !queue.isEmpty)
        writesInFlight += 1
        actions.append(.write(response, context))
        advance(&actions)
    }

    /// A write issued by `write`, `reject` or `writeContinue` finished.
    mutating func writeCompleted(into actions: inout [Action]) {
        guard lifecycle != .closed else { return }
        writesInFlight -= 1
        if lifecycle == .lingering { return }
        applyBackpressure(&actions)
        finishIfDone(&actions)
        updateTimer(&actions)
    }

    /// The timer fired. `requestID` names the 408 answer if a stalled request gets one.
    mutating func timerFired(requestID: String, into actions: inout [Action]) {
        guard let kind = timer else { return }
        timer = nil
        switch kind {
        case .request, .body, .drain:
            switch input {
            case .head, .body:
                let context: ResponseContext
                if case .body(let head, _, _) = input {
                    context = Self.context(head)
                } else {
                    context = ResponseContext(requestID: requestID, method: "-", version: .http1_1, keepAlive: false)
                }
                reject(ProblemError(status: 408, detail: "The request was not received in time."), context, &actions)
            case .idle where !anyRequestBegun:
                closeNow(&actions)
            default:
                updateTimer(&actions)
            }
        case .idle, .linger:
            closeNow(&actions)
        }
    }

    /// The peer ended its side of the connection (EOF). Complete requests are still answered.
    mutating func peerEnded(into actions: inout [Action]) {
        peerClosed = true
        switch lifecycle {
        case .closed:
            break
        case .lingering:
            closeNow(&actions)
        case .open, .draining, .closing:
            beginClosing(&actions)
            finishIfDone(&actions)
            updateTimer(&actions)
        }
    }

    /// Reading or writing failed (reset, broken pipe): nothing more can be delivered.
    mutating func ioFailed(into actions: inout [Action]) {
        guard lifecycle != .closed else { return }
        closeNow(&actions)
    }

    /// The server shuts down: finish the requests already received, and one still being received (within the
    /// `drain` timer), then close; with nothing to answer the connection closes at once.
    mutating func shutdownRequested(into actions: inout [Action]) {
        guard lifecycle == .open else { return }
        switch input {
        case .head, .body:
            lifecycle = .draining
            setReading(true, &actions)
        default:
            if queue.isEmpty && running == nil && writesInFlight == 0 {
                closeNow(&actions)
                return
            }
            beginClosing(&actions)
            finishIfDone(&actions)
        }
        updateTimer(&actions)
    }

    /// Whether the connection is a keep-alive one waiting between requests with nothing held: answered at least
    /// once, no request begun, nothing running, queued or being written. Such a connection may be reclaimed.
    var isIdleBetweenRequests: Bool {
        guard lifecycle == .open, case .idle = input else { return false }
        return anyRequestBegun && running == nil && queue.isEmpty && writesInFlight == 0
    }

    /// The server needs this idle connection's place (it is at its connection limit): close it now, as its idle
    /// timeout would. Nothing when it is no longer idle.
    mutating func reclaimed(into actions: inout [Action]) {
        guard isIdleBetweenRequests else { return }
        closeNow(&actions)
    }

    // MARK: - Internals

    /// Whether the request being received is still taken: always while open, and the last one while draining.
    private var receiving: Bool { lifecycle == .open || lifecycle == .draining }

    private static func context(_ head: HTTPRequestHead) -> ResponseContext {
        ResponseContext(requestID: head.request.requestID, method: head.request.method, version: head.version, keepAlive: head.keepAlive)
    }

    private static func bodyTooLarge(_ limit: Int) -> ProblemError {
        ProblemError(status: 413, detail: "The request body exceeds the limit of \(limit) bytes.")
    }

    /// Queues `problem` as the connection's last answer and stops taking requests.
    private mutating func reject(_ problem: ProblemError, _ context: ResponseContext, _ actions: inout [Action]) {
        beginClosing(&actions)
        queue.append(.rejection(problem, context))
        advance(&actions)
    }

    private mutating func beginClosing(_ actions: inout [Action]) {
        if receiving { lifecycle = .closing }
        input = .ignoring
        setReading(false, &actions)
    }

    /// Starts the next queued request when none runs, then settles reading, closing and the timer.
    private mutating func advance(_ actions: inout [Action]) {
        if running == nil, !queue.isEmpty {
            switch queue.removeFirst() {
            case .request(let request, let context):
                running = context
                actions.append(.startHandler(request, context))
            case .rejection(let problem, var context):
                context.keepAlive = false
                writesInFlight += 1
                actions.append(.reject(problem, context))
            }
        }
        applyBackpressure(&actions)
        finishIfDone(&actions)
        updateTimer(&actions)
    }

    /// Pauses reading while too many requests are pending, but never inside a body: a request begun is read
    /// whole (at most `maxBodyBytes`), so its body's clock never runs while the connection is not reading.
    private mutating func applyBackpressure(_ actions: inout [Action]) {
        guard lifecycle == .open else { return }
        if case .body = input {
            setReading(true, &actions)
            return
        }
        let backlog = queue.count + (running == nil ? 0 : 1) + writesInFlight
        setReading(backlog < configuration.maxPendingRequests, &actions)
    }

    /// When a body whose head ended at `since` and of which `received` bytes arrived falls behind the minimum
    /// rate: the grace period, or the time those bytes buy at that rate, whichever is longer.
    private func bodyDeadline(since: UInt64, received: Int) -> UInt64 {
        guard configuration.minBodyBytesPerSecond > 0 else { return .max }
        let earned = UInt64(received) * 1_000 / UInt64(configuration.minBodyBytesPerSecond)
        return since + max(UInt64(max(0, configuration.minBodyRateGraceMs)), earned)
    }

    private mutating func setReading(_ reading: Bool, _ actions: inout [Action]) {
        guard readingStopped == reading else { return }
        readingStopped = !reading
        actions.append(reading ? .startReading : .stopReading)
    }

    /// When closing and everything is answered: close (the peer already left) or linger.
    private mutating func finishIfDone(_ actions: inout [Action]) {
        guard lifecycle == .closing, running == nil, queue.isEmpty, writesInFlight == 0 else { return }
        if peerClosed {
            closeNow(&actions)
        } else {
            lifecycle = .lingering
            actions.append(.shutdownAndLinger)
        }
    }

    private mutating func closeNow(_ actions: inout [Action]) {
        lifecycle = .closed
        input = .ignoring
        queue.removeAll()
        timer = nil
        actions.append(.close)
    }

    /// Arms the timer the current state calls for, or cancels it.
    private mutating func updateTimer(_ actions: inout [Action]) {
        let desired: TimerKind?
        switch (lifecycle, input) {
        case (.closed, _):
            return
        case (.lingering, _):
            desired = .linger
        case (.draining, .head), (.draining, .body):
            desired = .drain
        case (_, .head):
            desired = .request
        case (_, .body(_, let body, let since)):
            desired = body.isEmpty ? .request : .body(until: bodyDeadline(since: since, received: body.count))
        case _ where running != nil || !queue.isEmpty:
            desired = nil
        case (.open, .idle):
            desired = anyRequestBegun || writesInFlight > 0 ? .idle : .request
        default:
            desired = writesInFlight > 0 ? .idle : nil
        }
        guard desired != timer else { return }
        timer = desired
        actions.append(desired.map { .armTimer($0) } ?? .cancelTimer)
    }
}
