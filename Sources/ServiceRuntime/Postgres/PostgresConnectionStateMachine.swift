/// The protocol logic of one PostgreSQL connection, free of I/O.
///
/// `PostgresConnection` reports what libpq and the socket told it as an `Event`; the machine updates its
/// state and answers with the one `Action` to carry out next. Carrying out an action may produce the next
/// event (a flush result, a fetched result…), which goes straight back into the machine, so one socket
/// callback runs a short chain of event → action → event until an action needs nothing more.
///
/// Requests are served one at a time in arrival order; the ones behind the current request wait in `queue`.
struct PostgresConnectionStateMachine {
    /// What the socket must be watched for.
    enum Interest: Equatable {
        case none, read, write, readWrite
    }

    /// How a request is sent, which decides when its results are complete.
    enum RequestKind: Equatable {
        /// One query (extended protocol) or one simple-protocol string: complete at the first NULL result.
        case single
        /// Several statements and a sync point in pipeline mode: complete at the sync result.
        case pipeline
    }

    /// One request the connection was asked to run; `id` ties it to the caller waiting for it.
    struct Request: Equatable {
        let id: Int
        let kind: RequestKind
    }

    /// What `PQconnectPoll` answered.
    enum ConnectPoll: Equatable {
        case reading, writing, ok, failed
    }

    /// What `PQflush` answered: 0, 1 or -1.
    enum Flush: Equatable {
        case done, pending, failed
    }

    /// What `PQgetResult` gave when libpq was not busy.
    enum Fetched: Equatable {
        /// A result for the current statement (rows, a command tag, an error, or an aborted marker).
        case result
        /// NULL: the current statement's results are complete.
        case end
        /// The pipeline's sync point.
        case pipelineSync
        /// A result the client cannot handle, such as the start of COPY: the connection cannot go on.
        case unsupported
    }

    /// Why the connection closes; the I/O shell turns it into the error pending callers receive.
    enum CloseReason: Equatable {
        /// The owner asked for it.
        case requested
        /// libpq or the socket failed; `PQerrorMessage` says why.
        case connectionError
        /// The connection was not established within its time limit.
        case connectTimeout
        /// A request waited longer than the answer timeout with nothing from the server.
        case answerTimeout
        /// The server sent something this client does not speak (COPY).
        case unsupportedResult
    }

    enum State: Equatable {
        /// `PQconnectStart` has not been reported yet.
        case initial
        /// The handshake is under way; libpq waits for the socket to become readable or writable.
        case connecting(Interest)
        /// Connected, nothing in flight; the socket is watched for readable (EOF, notices).
        case idle
        /// The request was handed to libpq and its bytes are being flushed.
        case sending(Request)
        /// Everything was sent; results are read as they arrive.
        case awaitingResults(Request)
        /// Finished for good.
        case closed
    }

    enum Event: Equatable {
        /// `PQconnectStart` returned a connection that is not already bad.
        case connectStarted
        case connectPolled(ConnectPoll)
        case readable
        case writable
        /// The socket has an error condition (libuv reports POLLERR as an error status). libpq learns what the
        /// error is, and reports it, the next time it touches the socket.
        case socketError
        /// The socket could not be watched at all (no socket, or libuv refused it).
        case watchFailed
        /// A caller submitted a request.
        case requestEnqueued(Request)
        /// `PQsendQuery*` accepted the request.
        case sent
        /// `PQsendQuery*` refused the request; `connectionBroken` when `PQstatus` is bad afterwards.
        case sendFailed(connectionBroken: Bool)
        case flushed(Flush)
        /// `PQconsumeInput` returned 1 (`true`) or 0.
        case inputConsumed(Bool)
        /// `PQisBusy` said a result is not complete yet.
        case busy
        case fetched(Fetched)
        /// `PQexitPipelineMode` returned 1 (`true`) or 0.
        case pipelineExited(Bool)
        /// The connect timer fired.
        case timedOut
        /// Nothing came from the server for the answer timeout while a request was in flight.
        case answerOverdue
        case closeRequested
    }

    enum Action: Equatable {
        /// Nothing to do.
        case none
        /// Watch the socket for `Interest` (re-creating the watcher if libpq changed the socket).
        case watch(Interest)
        /// Call `PQconnectPoll`.
        case pollConnect
        /// The handshake finished: resume the connecting caller, then send `next` or go idle watching read.
        case connected(next: Request?)
        /// Hand the request to libpq (`PQsendQueryParams`, `PQsendQuery` or a pipeline).
        case send(Request)
        /// Call `PQflush`.
        case flush
        /// Call `PQconsumeInput`.
        case consumeInput
        /// If `PQisBusy` is false, take one `PQgetResult` for the request.
        case fetchResult(Request)
        /// While idle: let libpq parse what arrived (notices), drop any stray result, keep watching read.
        case discardInput
        /// Call `PQexitPipelineMode` after the request's sync point.
        case exitPipeline(Request)
        /// The request's results are complete: resume its caller, then send `next` or go idle.
        case deliver(Request, next: Request?)
        /// libpq refused the request but the connection is fine: fail its caller, then send `next` or go idle.
        case fail(Request, next: Request?)
        /// Stop watching, `PQfinish`, and fail every pending caller.
        case close(CloseReason)
    }

    private(set) var state: State = .initial
    /// Requests waiting behind the one in flight, oldest first.
    private(set) var queue: [Request] = []

    mutating func handle(_ event: Event) -> Action {
        if case .closeRequested = event { return close(.requested) }
        if case .answerOverdue = event {
            // Only a request in flight waits for an answer; on an idle connection the timer was stale.
            switch state {
            case .sending, .awaitingResults: return close(.answerTimeout)
            default: return .none
            }
        }
        switch state {
        case .initial:
            return initial(event)
        case .connecting(let interest):
            return connecting(interest, event)
        case .idle:
            return idle(event)
        case .sending(let request):
            return sending(request, event)
        case .awaitingResults(let request):
            return awaitingResults(request, event)
        case .closed:
            if case .requestEnqueued(let request) = event { return .fail(request, next: nil) }
            return .none
        }
    }

    private mutating func initial(_ event: Event) -> Action {
        switch event {
        case .connectStarted:
            // libpq's contract: behave as if PQconnectPoll had answered "writing".
            state = .connecting(.write)
            return .watch(.write)
        case .requestEnqueued(let request):
            queue.append(request)
            return .none
        default:
            return .none
        }
    }

    private mutating func connecting(_ interest: Interest, _ event: Event) -> Action {
        switch event {
        case .readable where interest == .read, .writable where interest == .write:
            return .pollConnect
        case .connectPolled(.reading):
            state = .connecting(.read)
            return .watch(.read)
        case .connectPolled(.writing):
            state = .connecting(.write)
            return .watch(.write)
        case .connectPolled(.ok):
            let next = startNext()
            return .connected(next: next)
        case .socketError:
            return .pollConnect
        case .connectPolled(.failed), .watchFailed:
            return close(.connectionError)
        case .timedOut:
            return close(.connectTimeout)
        case .requestEnqueued(let request):
            queue.append(request)
            return .none
        default:
            return .none
        }
    }

    private mutating func idle(_ event: Event) -> Action {
        switch event {
        case .requestEnqueued(let request):
            state = .sending(request)
            return .send(request)
        case .readable, .socketError:
            return .consumeInput
        case .inputConsumed(true):
            return .discardInput
        case .inputConsumed(false), .watchFailed:
            return close(.connectionError)
        default:
            return .none
        }
    }

    private mutating func sending(_ request: Request, _ event: Event) -> Action {
        switch event {
        case .requestEnqueued(let queued):
            queue.append(queued)
            return .none
        case .sent, .writable, .inputConsumed(true):
            // libpq: after consuming input while a flush is pending, flush again.
            return .flush
        case .sendFailed(connectionBroken: false) where request.kind == .single:
            let next = startNext()
            return .fail(request, next: next)
        case .sendFailed:
            // A pipeline refused half-way cannot be taken back: the connection is unusable.
            return close(.connectionError)
        case .flushed(.pending):
            return .watch(.readWrite)
        case .flushed(.done):
            state = .awaitingResults(request)
            // Input consumed while flushing may already hold results.
            return .fetchResult(request)
        case .readable, .socketError:
            return .consumeInput
        case .flushed(.failed), .inputConsumed(false), .watchFailed:
            return close(.connectionError)
        default:
            return .none
        }
    }

    private mutating func awaitingResults(_ request: Request, _ event: Event) -> Action {
        switch event {
        case .requestEnqueued(let queued):
            queue.append(queued)
            return .none
        case .readable, .socketError:
            return .consumeInput
        case .inputConsumed(true), .fetched(.result):
            return .fetchResult(request)
        case .busy:
            return .watch(.read)
        case .fetched(.end):
            switch request.kind {
            case .single:
                let next = startNext()
                return .deliver(request, next: next)
            case .pipeline:
                // NULL separates the statements of a pipeline; the sync result ends it.
                return .fetchResult(request)
            }
        case .fetched(.pipelineSync) where request.kind == .pipeline:
            return .exitPipeline(request)
        case .pipelineExited(true):
            let next = startNext()
            return .deliver(request, next: next)
        case .fetched(.unsupported), .fetched(.pipelineSync):
            return close(.unsupportedResult)
        case .inputConsumed(false), .pipelineExited(false), .watchFailed:
            return close(.connectionError)
        default:
            return .none
        }
    }

    /// Takes the oldest queued request as the one being sent, or goes idle.
    private mutating func startNext() -> Request? {
        guard !queue.isEmpty else {
            state = .idle
            return nil
        }
        let next = queue.removeFirst()
        state = .sending(next)
        return next
    }

    private mutating func close(_ reason: CloseReason) -> Action {
        if state == .closed { return .none }
        state = .closed
        queue.removeAll()
        return .close(reason)
    }
}
