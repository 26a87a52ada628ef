import Testing
@testable import AppStore
@testable import EntitlementService
@testable import FakeAppStore
@testable import ServiceRuntime

/// The connection's protocol logic, driven event by event without libpq or a socket.
@Suite struct PostgresStateMachineTests {
    typealias Machine = PostgresConnectionStateMachine
    let single = Machine.Request(id: 1, kind: .single)
    let second = Machine.Request(id: 2, kind: .single)
    let pipeline = Machine.Request(id: 3, kind: .pipeline)

    /// A machine that has finished its handshake.
    func connected() -> Machine {
        var machine = Machine()
        _ = machine.handle(.connectStarted)
        _ = machine.handle(.connectPolled(.ok))
        return machine
    }

    @Test func handshakeFollowsWhatConnectPollAsksFor() {
        var machine = Machine()
        #expect(machine.handle(.connectStarted) == .watch(.write))
        #expect(machine.state == .connecting(.write))
        #expect(machine.handle(.readable) == .none, "readiness libpq did not ask for is ignored")
        #expect(machine.handle(.writable) == .pollConnect)
        #expect(machine.handle(.connectPolled(.reading)) == .watch(.read))
        #expect(machine.handle(.writable) == .none)
        #expect(machine.handle(.readable) == .pollConnect)
        #expect(machine.handle(.connectPolled(.writing)) == .watch(.write))
        #expect(machine.handle(.writable) == .pollConnect)
        #expect(machine.handle(.connectPolled(.ok)) == .connected(next: nil))
        #expect(machine.state == .idle)
    }

    @Test func handshakeFailureAndTimeoutClose() {
        var failing = Machine()
        _ = failing.handle(.connectStarted)
        #expect(failing.handle(.connectPolled(.failed)) == .close(.connectionError))
        #expect(failing.state == .closed)

        var slow = Machine()
        _ = slow.handle(.connectStarted)
        _ = slow.handle(.connectPolled(.reading))
        #expect(slow.handle(.timedOut) == .close(.connectTimeout))
        #expect(slow.handle(.connectPolled(.ok)) == .none, "nothing happens after close")
    }

    /// The answer timer closes a connection only while a request waits for the server; idle, it was stale.
    @Test func anOverdueAnswerClosesOnlyWhileARequestWaits() {
        var waiting = connected()
        _ = waiting.handle(.requestEnqueued(single))
        _ = waiting.handle(.sent)
        _ = waiting.handle(.flushed(.done))
        #expect(waiting.handle(.answerOverdue) == .close(.answerTimeout))
        #expect(waiting.state == .closed)

        var sending = connected()
        _ = sending.handle(.requestEnqueued(single))
        #expect(sending.handle(.answerOverdue) == .close(.answerTimeout))

        var idle = connected()
        #expect(idle.handle(.answerOverdue) == .none)
        #expect(idle.state == .idle)
    }

    @Test func requestsEnqueuedWhileConnectingStartOnceConnected() {
        var machine = Machine()
        _ = machine.handle(.connectStarted)
        #expect(machine.handle(.requestEnqueued(single)) == .none)
        #expect(machine.handle(.connectPolled(.ok)) == .connected(next: single))
        #expect(machine.state == .sending(single))
    }

    @Test func queryThatFlushesAtOnce() {
        var machine = connected()
        #expect(machine.handle(.requestEnqueued(single)) == .send(single))
        #expect(machine.handle(.sent) == .flush)
        #expect(machine.handle(.flushed(.done)) == .fetchResult(single))
        #expect(machine.state == .awaitingResults(single))
        #expect(machine.handle(.busy) == .watch(.read))
        #expect(machine.handle(.readable) == .consumeInput)
        #expect(machine.handle(.inputConsumed(true)) == .fetchResult(single))
        #expect(machine.handle(.fetched(.result)) == .fetchResult(single))
        #expect(machine.handle(.fetched(.end)) == .deliver(single, next: nil))
        #expect(machine.state == .idle)
    }

    @Test func partialFlushWatchesBothDirectionsAndConsumesInputBeforeFlushingAgain() {
        var machine = connected()
        _ = machine.handle(.requestEnqueued(single))
        _ = machine.handle(.sent)
        #expect(machine.handle(.flushed(.pending)) == .watch(.readWrite))
        #expect(machine.state == .sending(single))
        #expect(machine.handle(.readable) == .consumeInput)
        #expect(machine.handle(.inputConsumed(true)) == .flush)
        #expect(machine.handle(.flushed(.pending)) == .watch(.readWrite))
        #expect(machine.handle(.writable) == .flush)
        #expect(machine.handle(.flushed(.done)) == .fetchResult(single))
    }

    @Test func requestsQueueBehindTheOneInFlightAndRunInOrder() {
        var machine = connected()
        _ = machine.handle(.requestEnqueued(single))
        #expect(machine.handle(.requestEnqueued(second)) == .none)
        #expect(machine.handle(.requestEnqueued(pipeline)) == .none)
        #expect(machine.queue == [second, pipeline])
        _ = machine.handle(.sent)
        _ = machine.handle(.flushed(.done))
        #expect(machine.handle(.fetched(.end)) == .deliver(single, next: second))
        #expect(machine.state == .sending(second))
        _ = machine.handle(.sent)
        _ = machine.handle(.flushed(.done))
        #expect(machine.handle(.fetched(.end)) == .deliver(second, next: pipeline))
        #expect(machine.queue.isEmpty)
    }

    @Test func aRefusedQueryFailsAloneWhileABrokenConnectionCloses() {
        var machine = connected()
        _ = machine.handle(.requestEnqueued(single))
        _ = machine.handle(.requestEnqueued(second))
        #expect(machine.handle(.sendFailed(connectionBroken: false)) == .fail(single, next: second))
        #expect(machine.state == .sending(second))
        #expect(machine.handle(.sendFailed(connectionBroken: true)) == .close(.connectionError))
        #expect(machine.state == .closed)
        #expect(machine.handle(.requestEnqueued(pipeline)) == .fail(pipeline, next: nil))
    }

    @Test func aPipelineThatCannotBeSentClosesTheConnection() {
        var machine = connected()
        _ = machine.handle(.requestEnqueued(pipeline))
        #expect(machine.handle(.sendFailed(connectionBroken: false)) == .close(.connectionError))
    }

    @Test func pipelineResultsRunUntilTheSyncPoint() {
        var machine = connected()
        #expect(machine.handle(.requestEnqueued(pipeline)) == .send(pipeline))
        _ = machine.handle(.sent)
        _ = machine.handle(.flushed(.done))
        #expect(machine.handle(.fetched(.result)) == .fetchResult(pipeline))
        #expect(machine.handle(.fetched(.end)) == .fetchResult(pipeline), "NULL only separates statements")
        #expect(machine.handle(.busy) == .watch(.read))
        #expect(machine.handle(.readable) == .consumeInput)
        #expect(machine.handle(.inputConsumed(true)) == .fetchResult(pipeline))
        #expect(machine.handle(.fetched(.result)) == .fetchResult(pipeline))
        #expect(machine.handle(.fetched(.end)) == .fetchResult(pipeline))
        #expect(machine.handle(.fetched(.pipelineSync)) == .exitPipeline(pipeline))
        #expect(machine.handle(.pipelineExited(true)) == .deliver(pipeline, next: nil))
        #expect(machine.state == .idle)
    }

    @Test func pipelineModeThatCannotBeLeftClosesTheConnection() {
        var machine = connected()
        _ = machine.handle(.requestEnqueued(pipeline))
        _ = machine.handle(.sent)
        _ = machine.handle(.flushed(.done))
        _ = machine.handle(.fetched(.pipelineSync))
        #expect(machine.handle(.pipelineExited(false)) == .close(.connectionError))
    }

    @Test func idleInputIsDrainedAndEndOfFileCloses() {
        var machine = connected()
        #expect(machine.handle(.readable) == .consumeInput)
        #expect(machine.handle(.inputConsumed(true)) == .discardInput)
        #expect(machine.state == .idle)
        #expect(machine.handle(.writable) == .none)
        #expect(machine.handle(.readable) == .consumeInput)
        #expect(machine.handle(.inputConsumed(false)) == .close(.connectionError))
    }

    @Test func lostConnectionWhileWaitingClosesEvenWithRequestsQueued() {
        var machine = connected()
        _ = machine.handle(.requestEnqueued(single))
        _ = machine.handle(.requestEnqueued(second))
        _ = machine.handle(.sent)
        _ = machine.handle(.flushed(.done))
        #expect(machine.handle(.inputConsumed(false)) == .close(.connectionError))
        #expect(machine.queue.isEmpty)
    }

    @Test func flushFailureAndSocketErrorsClose() {
        var flushing = connected()
        _ = flushing.handle(.requestEnqueued(single))
        _ = flushing.handle(.sent)
        #expect(flushing.handle(.flushed(.failed)) == .close(.connectionError))

        var waiting = connected()
        _ = waiting.handle(.requestEnqueued(single))
        _ = waiting.handle(.sent)
        _ = waiting.handle(.flushed(.done))
        #expect(waiting.handle(.watchFailed) == .close(.connectionError))
    }

    @Test func socketErrorConditionsLetLibpqFindTheError() {
        var connecting = Machine()
        _ = connecting.handle(.connectStarted)
        #expect(connecting.handle(.socketError) == .pollConnect)

        var idle = connected()
        #expect(idle.handle(.socketError) == .consumeInput)

        var sending = connected()
        _ = sending.handle(.requestEnqueued(single))
        _ = sending.handle(.sent)
        _ = sending.handle(.flushed(.pending))
        #expect(sending.handle(.socketError) == .consumeInput)

        var waiting = connected()
        _ = waiting.handle(.requestEnqueued(single))
        _ = waiting.handle(.sent)
        _ = waiting.handle(.flushed(.done))
        #expect(waiting.handle(.socketError) == .consumeInput)
        #expect(waiting.handle(.inputConsumed(false)) == .close(.connectionError))
    }

    @Test func copyIsRefusedByClosing() {
        var machine = connected()
        _ = machine.handle(.requestEnqueued(single))
        _ = machine.handle(.sent)
        _ = machine.handle(.flushed(.done))
        #expect(machine.handle(.fetched(.unsupported)) == .close(.unsupportedResult))
    }

    @Test func closeIsRequestedOnceFromAnyState() {
        var machine = connected()
        _ = machine.handle(.requestEnqueued(single))
        #expect(machine.handle(.closeRequested) == .close(.requested))
        #expect(machine.handle(.closeRequested) == .none)

        var fresh = Machine()
        #expect(fresh.handle(.closeRequested) == .close(.requested))
    }
}
