import Testing
@testable import AppStore
@testable import EntitlementService
@testable import FakeAppStore
@testable import ServiceRuntime

/// The connection's protocol logic, driven event by event without sockets.
@Suite struct HTTPConnectionStateMachineTests {
    typealias Machine = HTTPConnectionStateMachine
    typealias Context = Machine.ResponseContext

    /// A machine whose bodies must arrive at 100 bytes/s after 5 s.
    private func machine(maxBodyBytes: Int = 1000, maxPending: Int = 8) -> Machine {
        Machine(configuration: .init(maxBodyBytes: maxBodyBytes, maxPendingRequests: maxPending,
                                     minBodyBytesPerSecond: 100, minBodyRateGraceMs: 5_000))
    }

    private func head(_ path: String = "/", id: String = "r1", keepAlive: Bool = true, expect: Bool = false,
                      length: Int? = nil, version: HTTPVersion = .http1_1) -> HTTPRequestHead {
        HTTPRequestHead(request: HTTPRequest(method: "GET", path: path, requestID: id), version: version,
                        keepAlive: keepAlive, expectsContinue: expect, contentLength: length)
    }

    private func context(_ head: HTTPRequestHead, keepAlive: Bool? = nil) -> Context {
        Context(requestID: head.request.requestID, method: head.request.method, version: head.version, keepAlive: keepAlive ?? head.keepAlive)
    }

    private func request(_ head: HTTPRequestHead, body: [UInt8] = []) -> HTTPRequest {
        HTTPRequest(head: head, body: body)
    }

    /// Feeds a whole request (begin, head, optional body, end) and returns the actions of its end.
    private func receive(_ machine: inout Machine, _ head: HTTPRequestHead, body: [UInt8]? = nil) -> [Machine.Action] {
        _ = machine.messageBegin()
        _ = machine.receivedHead(head)
        if let body { _ = machine.receivedBody(body) }
        return machine.receivedEnd()
    }

    private let ok = HTTPResponse.text("ok")

    @Test func connectingStartsReadingUnderTheRequestTimer() {
        var machine = machine()
        #expect(machine.connected() == [.startReading, .armTimer(.request)])
    }

    @Test func oneKeepAliveRequest() {
        var machine = machine()
        _ = machine.connected()
        let head = head()
        #expect(machine.messageBegin() == [])
        #expect(machine.receivedHead(head) == [])
        #expect(machine.receivedEnd() == [.startHandler(request(head), context(head)), .cancelTimer])
        #expect(machine.handlerFinished(ok) == [.write(ok, context(head)), .armTimer(.idle)])
        #expect(machine.writeCompleted() == [])
        #expect(machine.messageBegin() == [.armTimer(.request)])
    }

    /// Only a keep-alive connection between requests with nothing held may be reclaimed for a new client: not one
    /// that never sent a request, nor one receiving, running or writing one.
    @Test func onlyAConnectionIdleBetweenRequestsIsReclaimed() {
        var machine = machine()
        _ = machine.connected()
        #expect(!machine.isIdleBetweenRequests && machine.reclaimed() == [])
        let head = head()
        _ = receive(&machine, head)
        #expect(!machine.isIdleBetweenRequests, "running")
        _ = machine.handlerFinished(ok)
        #expect(!machine.isIdleBetweenRequests, "writing")
        _ = machine.writeCompleted()
        #expect(machine.isIdleBetweenRequests)
        _ = machine.messageBegin()
        #expect(!machine.isIdleBetweenRequests && machine.reclaimed() == [], "a request begun")
        _ = machine.receivedHead(head)
        _ = machine.receivedEnd()
        _ = machine.handlerFinished(ok)
        _ = machine.writeCompleted()
        #expect(machine.reclaimed() == [.close])
        #expect(!machine.isIdleBetweenRequests)
    }

    @Test func bodyPiecesAccumulateAndKeepTheTimerAlive() {
        var machine = machine()
        _ = machine.connected()
        let head = head(length: 6)
        _ = machine.messageBegin()
        _ = machine.receivedHead(head)
        #expect(machine.receivedBody(Array("abc".utf8)) == [.armTimer(.body(until: 5_000))])
        #expect(machine.receivedBody(Array("def".utf8)) == [.armTimer(.body(until: 5_000))])
        #expect(machine.receivedEnd().first == .startHandler(request(head, body: Array("abcdef".utf8)), context(head)))
    }

    @Test func pipelinedRequestsRunOneAtATimeInOrder() {
        var machine = machine()
        _ = machine.connected()
        let first = head("/1", id: "a")
        let second = head("/2", id: "b")
        #expect(receive(&machine, first) == [.startHandler(request(first), context(first)), .cancelTimer])
        // The second request was timed while it arrived; complete, it waits without a timer.
        #expect(receive(&machine, second) == [.cancelTimer])
        #expect(machine.handlerFinished(ok) == [.write(ok, context(first)), .startHandler(request(second), context(second))])
        #expect(machine.writeCompleted() == [])
        #expect(machine.handlerFinished(ok) == [.write(ok, context(second)), .armTimer(.idle)])
    }

    @Test func readingPausesWhileTooManyRequestsArePending() {
        var machine = machine(maxPending: 2)
        _ = machine.connected()
        let first = head("/1", id: "a")
        let second = head("/2", id: "b")
        _ = receive(&machine, first)
        #expect(receive(&machine, second) == [.stopReading, .cancelTimer])
        // The first answer is being written while the second runs: still two pending.
        #expect(machine.handlerFinished(ok) == [.write(ok, context(first)), .startHandler(request(second), context(second))])
        #expect(machine.writeCompleted() == [.startReading])
    }

    @Test func connectionCloseAnswersThenLingersUntilThePeerCloses() {
        var machine = machine()
        _ = machine.connected()
        let head = head(keepAlive: false)
        #expect(receive(&machine, head) == [.stopReading, .startHandler(request(head), context(head)), .cancelTimer])
        #expect(machine.handlerFinished(ok) == [.write(ok, context(head)), .armTimer(.idle)])
        #expect(machine.writeCompleted() == [.shutdownAndLinger, .armTimer(.linger)])
        #expect(machine.peerEnded() == [.close])
    }

    @Test func lingeringEndsWithTheLingerTimer() {
        var machine = machine()
        _ = machine.connected()
        _ = receive(&machine, head(keepAlive: false))
        _ = machine.handlerFinished(ok)
        _ = machine.writeCompleted()
        #expect(machine.timerFired(requestID: "t") == [.close])
        #expect(machine.handlerFinished(ok) == [])
    }

    @Test func declaredBodyOverTheLimitIsRejectedAtTheHead() {
        var machine = machine(maxBodyBytes: 10)
        _ = machine.connected()
        let head = head(length: 11)
        _ = machine.messageBegin()
        let actions = machine.receivedHead(head)
        #expect(actions.count == 3)
        #expect(actions[0] == .stopReading)
        guard case .reject(let problem, let context) = actions[1] else {
            Issue.record("expected a rejection, got \(actions)")
            return
        }
        #expect(problem.status == 413)
        #expect(context == self.context(head, keepAlive: false))
        #expect(actions[2] == .armTimer(.idle))
        #expect(machine.receivedBody([1, 2, 3]) == [])
        #expect(machine.writeCompleted() == [.shutdownAndLinger, .armTimer(.linger)])
    }

    @Test func chunkedBodyGrowingOverTheLimitIsRejected() {
        var machine = machine(maxBodyBytes: 10)
        _ = machine.connected()
        _ = machine.messageBegin()
        _ = machine.receivedHead(head())
        #expect(machine.receivedBody(Array(repeating: 1, count: 6)) == [.armTimer(.body(until: 5_000))])
        let actions = machine.receivedBody(Array(repeating: 1, count: 6))
        #expect(actions.contains(.stopReading))
        #expect(actions.contains { if case .reject(let problem, _) = $0 { problem.status == 413 } else { false } })
        #expect(machine.receivedEnd() == [])
    }

    @Test func aParseFailureIsAnsweredAfterTheRequestsBeforeIt() {
        var machine = machine()
        _ = machine.connected()
        let first = head()
        _ = receive(&machine, first)
        _ = machine.messageBegin()
        #expect(machine.parseFailed(.malformed("bad"), requestID: "bad-id", method: nil) == [.stopReading, .cancelTimer])
        let failure = HTTPParseFailure.malformed("bad").problem
        let rejection = Context(requestID: "bad-id", method: "-", version: .http1_1, keepAlive: false)
        // The earlier answer keeps the connection open in its framing: the rejection follows it.
        #expect(machine.handlerFinished(ok) == [.write(ok, context(first)), .reject(failure, rejection), .armTimer(.idle)])
        #expect(machine.writeCompleted() == [])
        #expect(machine.writeCompleted() == [.shutdownAndLinger, .armTimer(.linger)])
    }

    /// After the grace period a body must have arrived at the minimum rate on average since its head: each piece
    /// moves the instant it falls behind by what it buys, and falling behind is a 408 like a stall.
    @Test func aBodyFallingBehindTheMinimumRateGets408() {
        var machine = machine()
        _ = machine.connected()
        _ = machine.messageBegin()
        let head = head("/slow", id: "slow", length: 900)
        // Until a first piece arrives the head's timer runs on; from then on, the rate's instant too.
        #expect(machine.receivedHead(head, at: 1_000) == [])
        #expect(machine.receivedBody(Array(repeating: 1, count: 400)) == [.armTimer(.body(until: 6_000))])
        #expect(machine.receivedBody(Array(repeating: 1, count: 200)) == [.armTimer(.body(until: 7_000))])
        let actions = machine.timerFired(requestID: "t")
        #expect(actions == [.stopReading, .reject(ProblemError(status: 408, detail: "The request was not received in time."),
                                                  context(head, keepAlive: false)), .armTimer(.idle)])
        #expect(machine.receivedBody([1]) == [])
    }

    /// Reading pauses between requests, never inside a body: the body's clock never runs while the connection
    /// does not read.
    @Test func aBodyBegunIsReadWholeWhileRequestsPile() {
        var machine = machine(maxPending: 1)
        _ = machine.connected()
        let first = head("/1", id: "a")
        #expect(receive(&machine, first) == [.startHandler(request(first), context(first)), .stopReading, .cancelTimer])
        // The next request's head was in the same read.
        _ = machine.messageBegin()
        let second = head("/2", id: "b", length: 2)
        #expect(machine.receivedHead(second) == [.startReading])
        _ = machine.receivedBody([1, 2])
        #expect(machine.receivedEnd() == [.stopReading, .cancelTimer])
        #expect(machine.handlerFinished(ok) == [.write(ok, context(first)), .startHandler(request(second, body: [1, 2]), context(second))])
    }

    @Test func stalledHeadGets408() {
        var machine = machine()
        _ = machine.connected()
        _ = machine.messageBegin()
        let actions = machine.timerFired(requestID: "late")
        let expected = Context(requestID: "late", method: "-", version: .http1_1, keepAlive: false)
        #expect(actions == [.stopReading, .reject(ProblemError(status: 408, detail: "The request was not received in time."), expected), .armTimer(.idle)])
    }

    @Test func silentNewConnectionIsClosedByTheRequestTimer() {
        var machine = machine()
        _ = machine.connected()
        #expect(machine.timerFired(requestID: "x") == [.close])
    }

    @Test func idleKeepAliveConnectionIsClosedByTheIdleTimer() {
        var machine = machine()
        _ = machine.connected()
        _ = receive(&machine, head())
        _ = machine.handlerFinished(ok)
        _ = machine.writeCompleted()
        #expect(machine.timerFired(requestID: "x") == [.close])
        #expect(machine.messageBegin() == [])
    }

    @Test func expectContinueIsAnsweredOnlyWhenNothingIsAhead() {
        var machine = machine()
        _ = machine.connected()
        _ = machine.messageBegin()
        #expect(machine.receivedHead(head(expect: true, length: 4)) == [.writeContinue])
        _ = machine.writeCompleted()
        _ = machine.receivedBody([1, 2, 3, 4])
        _ = machine.receivedEnd()
        _ = machine.messageBegin()
        // The first request's handler still runs: an interim answer now would overtake its response.
        #expect(machine.receivedHead(head(id: "r2", expect: true, length: 4)) == [])
    }

    @Test func peerEndAfterACompleteRequestStillGetsTheAnswer() {
        var machine = machine()
        _ = machine.connected()
        let head = head()
        _ = receive(&machine, head)
        #expect(machine.peerEnded() == [.stopReading])
        #expect(machine.handlerFinished(ok) == [.write(ok, context(head, keepAlive: false)), .armTimer(.idle)])
        #expect(machine.writeCompleted() == [.close])
    }

    @Test func peerEndMidRequestClosesAtOnce() {
        var machine = machine()
        _ = machine.connected()
        _ = machine.messageBegin()
        #expect(machine.peerEnded() == [.stopReading, .close])
    }

    @Test func shutdownClosesAnIdleConnectionAtOnce() {
        var machine = machine()
        _ = machine.connected()
        _ = receive(&machine, head())
        _ = machine.handlerFinished(ok)
        _ = machine.writeCompleted()
        #expect(machine.shutdownRequested() == [.close])
    }

    @Test func shutdownLetsTheRunningRequestFinish() {
        var machine = machine()
        _ = machine.connected()
        let head = head()
        _ = receive(&machine, head)
        #expect(machine.shutdownRequested() == [.stopReading])
        #expect(machine.handlerFinished(ok) == [.write(ok, context(head, keepAlive: false)), .armTimer(.idle)])
        #expect(machine.writeCompleted() == [.shutdownAndLinger, .armTimer(.linger)])
    }

    /// A request half received when the server shuts down is read to its end under one fixed deadline (its body's
    /// pieces no longer extend it), answered as the connection's last, and nothing after it is taken.
    @Test func shutdownReadsAHalfReceivedRequestToItsEnd() {
        var machine = machine()
        _ = machine.connected()
        let head = head(length: 6)
        _ = machine.messageBegin()
        _ = machine.receivedHead(head)
        _ = machine.receivedBody(Array("abc".utf8))
        #expect(machine.shutdownRequested() == [.armTimer(.drain)])
        #expect(machine.receivedBody(Array("def".utf8)) == [])
        #expect(machine.receivedEnd() == [.stopReading, .startHandler(request(head, body: Array("abcdef".utf8)), context(head)), .cancelTimer])
        #expect(machine.messageBegin() == [])
        #expect(machine.handlerFinished(ok) == [.write(ok, context(head, keepAlive: false)), .armTimer(.idle)])
        #expect(machine.writeCompleted() == [.shutdownAndLinger, .armTimer(.linger)])
    }

    /// Behind a running request, a half-received one keeps the connection alive for its answer; one that does not
    /// arrive within the drain deadline is a 408, the last answer.
    @Test func shutdownGivesAHalfReceivedRequestOneDeadline() {
        var machine = machine()
        _ = machine.connected()
        let first = head("/1", id: "a")
        _ = receive(&machine, first)
        _ = machine.messageBegin()
        #expect(machine.shutdownRequested() == [.armTimer(.drain)])
        #expect(machine.handlerFinished(ok) == [.write(ok, context(first))])
        #expect(machine.writeCompleted() == [])
        let actions = machine.timerFired(requestID: "late")
        guard case .reject(let problem, let context)? = actions.first(where: { if case .reject = $0 { true } else { false } }) else {
            Issue.record("expected a rejection, got \(actions)")
            return
        }
        #expect(problem.status == 408 && context.requestID == "late" && !context.keepAlive)
        #expect(machine.writeCompleted() == [.shutdownAndLinger, .armTimer(.linger)])
    }

    @Test func refusedConnectionAnswers503ThenLingers() {
        var machine = machine()
        let actions = machine.refused(requestID: "busy")
        #expect(actions.count == 2)
        guard case .reject(let problem, let context) = actions.first else {
            Issue.record("expected a rejection, got \(actions)")
            return
        }
        #expect(problem.status == 503)
        #expect(problem.response.headers["Retry-After"] == "1")
        #expect(context == Context(requestID: "busy", method: "-", version: .http1_1, keepAlive: false))
        #expect(machine.writeCompleted() == [.shutdownAndLinger, .armTimer(.linger)])
    }

    @Test func ioFailureClosesAndLaterEventsAreIgnored() {
        var machine = machine()
        _ = machine.connected()
        _ = receive(&machine, head())
        #expect(machine.ioFailed() == [.close])
        #expect(machine.handlerFinished(ok) == [])
        #expect(machine.writeCompleted() == [])
        #expect(machine.timerFired(requestID: "x") == [])
        #expect(machine.ioFailed() == [])
    }

    @Test func http10KeepAliveIsKeptInTheContext() {
        var machine = machine()
        _ = machine.connected()
        let head = head(version: .http1_0)
        _ = receive(&machine, head)
        #expect(machine.handlerFinished(ok).first == .write(ok, Context(requestID: "r1", method: "GET", version: .http1_0, keepAlive: true)))
    }
}

/// Each event's actions as an array of their own, as these tests compare them (the connection appends them
/// all to one list).
private extension HTTPConnectionStateMachine {
    mutating func collect(_ event: (inout Self, inout [Action]) -> Void) -> [Action] {
        var actions: [Action] = []
        event(&self, &actions)
        return actions
    }

    mutating func connected() -> [Action] { collect { $0.connected(into: &$1) } }
    mutating func refused(requestID: String) -> [Action] { collect { $0.refused(requestID: requestID, into: &$1) } }
    mutating func messageBegin() -> [Action] { collect { $0.messageBegin(into: &$1) } }
    mutating func receivedHead(_ head: HTTPRequestHead, at now: UInt64 = 0) -> [Action] { collect { $0.receivedHead(head, at: now, into: &$1) } }
    mutating func receivedBody(_ bytes: [UInt8]) -> [Action] { collect { $0.receivedBody(bytes, into: &$1) } }
    mutating func receivedEnd() -> [Action] { collect { $0.receivedEnd(into: &$1) } }
    mutating func parseFailed(_ failure: HTTPParseFailure, requestID: String, method: String?) -> [Action] {
        collect { $0.parseFailed(failure, requestID: requestID, method: method, into: &$1) }
    }
    mutating func handlerFinished(_ response: HTTPResponse) -> [Action] { collect { $0.handlerFinished(response, into: &$1) } }
    mutating func writeCompleted() -> [Action] { collect { $0.writeCompleted(into: &$1) } }
    mutating func timerFired(requestID: String) -> [Action] { collect { $0.timerFired(requestID: requestID, into: &$1) } }
    mutating func peerEnded() -> [Action] { collect { $0.peerEnded(into: &$1) } }
    mutating func ioFailed() -> [Action] { collect { $0.ioFailed(into: &$1) } }
    mutating func shutdownRequested() -> [Action] { collect { $0.shutdownRequested(into: &$1) } }
    mutating func reclaimed() -> [Action] { collect { $0.reclaimed(into: &$1) } }
}
