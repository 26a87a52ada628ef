import CUV
import Foundation

/// The process's single libuv loop and the thread that owns it.
///
/// Every socket, timer and poll handle of the service lives on this loop, and Swift concurrency runs on it
/// too: `EventLoop` is the `SerialExecutor` behind the `@Loop` global actor, so `async` handlers resume on
/// the loop thread and may touch libuv handles directly. Other threads reach the loop only through
/// `enqueue`, which appends to a locked queue and wakes the loop with `uv_async_send`.
///
/// Its `taskExecutor` runs tasks on the loop too: a task started with it as its executor preference (the HTTP
/// server's handler tasks) resumes from a continuation straight on the loop, where it would otherwise be
/// enqueued on the global concurrent executor, woken on one of its threads, and only then sent back.
public final class EventLoop: SerialExecutor, @unchecked Sendable {
    /// The loop every part of the process shares; its thread starts on first use.
    public static let shared = EventLoop()

    /// The libuv loop. Touch it only on the loop thread.
    public let uv: UnsafeMutablePointer<uv_loop_t>
    private let wakeup: UnsafeMutablePointer<uv_async_t>
    /// Finishes what an iteration left for its end (`finishBeforeWaiting`), then writes the log lines it
    /// buffered, before the loop waits for I/O again.
    private let beforeWaitingHandle: UnsafeMutablePointer<uv_prepare_t>
    /// Objects to finish before the loop waits again, and the array being drained (kept for its capacity).
    nonisolated(unsafe) private var finishing: [any FinishBeforeWaiting] = []
    nonisolated(unsafe) private var draining: [any FinishBeforeWaiting] = []
    private let lock = NSLock()
    /// Jobs to run, each with whether it came through `taskExecutor`.
    private var queued: [(job: UnownedJob, preferring: Bool)] = []
    private var threadID: pthread_t?
    private let started = DispatchSemaphore(value: 0)

    private init() {
        signal(SIGPIPE, SIG_IGN)
        uv = .allocate(capacity: 1)
        precondition(uv_loop_init(uv) == 0, "uv_loop_init failed")
        wakeup = .allocate(capacity: 1)
        precondition(uv_async_init(uv, wakeup, { handle in
            guard let data = handle?.pointee.data else { return }
            Unmanaged<EventLoop>.fromOpaque(data).takeUnretainedValue().runQueued()
        }) == 0, "uv_async_init failed")
        beforeWaitingHandle = .allocate(capacity: 1)
        uv_prepare_init(uv, beforeWaitingHandle)
        uv_prepare_start(beforeWaitingHandle) { handle in
            if let data = handle?.pointee.data {
                let loop = Unmanaged<EventLoop>.fromOpaque(data).takeUnretainedValue()
                loop.checkIsolated()
                EventLoop.finishQueuedOnLoop(loop)
            }
            Log.flush()
        }
        uv_unref(cuv_handle(beforeWaitingHandle))
        wakeup.pointee.data = Unmanaged.passUnretained(self).toOpaque()
        beforeWaitingHandle.pointee.data = wakeup.pointee.data
        _ = taskExecutor  // made here, before any other thread can ask for it
        let thread = Thread { [self] in
            threadID = pthread_self()
            Log.bufferOnCurrentThread()
            started.signal()
            uv_run(uv, UV_RUN_DEFAULT)
        }
        thread.name = "uv-loop"
        thread.stackSize = 8 << 20
        thread.start()
        started.wait()
    }

    /// True when the caller runs on the loop thread.
    public var inLoopThread: Bool {
        guard let threadID else { return false }
        return pthread_equal(threadID, pthread_self()) != 0
    }

    /// Queues `job` from any thread and wakes the loop; jobs run on the loop thread in order, at most `batchLimit` per wake-up.
    public func enqueue(_ job: consuming ExecutorJob) {
        enqueue(UnownedJob(job), preferring: false)
    }

    /// The loop as a task executor, for tasks that should resume on it (`Task(executorPreference:)`).
    public private(set) lazy var taskExecutor = LoopTaskExecutor(self)

    fileprivate func enqueue(_ job: UnownedJob, preferring: Bool) {
        lock.lock()
        queued.append((job, preferring))
        lock.unlock()
        uv_async_send(wakeup)
    }

    /// `self` as an ordinary serial executor: the executor of every `@Loop` function.
    public func asUnownedSerialExecutor() -> UnownedSerialExecutor {
        UnownedSerialExecutor(ordinary: self)
    }

    /// Traps unless called on the loop thread; the runtime's `@Loop` isolation checks and `Loop.assumeIsolated` call it.
    public func checkIsolated() {
        precondition(inLoopThread, "expected to run on the uv loop thread")
    }

    /// At most this many jobs run per wake-up, so timers and sockets are served between bursts of work.
    static let batchLimit = 64

    /// Runs the oldest queued jobs, at most `batchLimit`; jobs they enqueue, and any left over, wait for the
    /// next loop iteration, so I/O is never starved by a burst of resumed tasks.
    private func runQueued() {
        lock.lock()
        let count = min(queued.count, Self.batchLimit)
        let batch = Array(queued[..<count])
        queued.removeFirst(count)
        let more = !queued.isEmpty
        lock.unlock()
        if more { uv_async_send(wakeup) }
        // A job that came through the task executor (a resumed continuation of a task preferring the loop) runs
        // isolated to the loop as well: the loop thread runs one job at a time, and so its hop back to `@Loop`
        // costs nothing.
        let executor = asUnownedSerialExecutor()
        let taskExecutor = taskExecutor.asUnownedTaskExecutor()
        for (job, preferring) in batch {
            if preferring {
                job.runSynchronously(isolatedTo: executor, taskExecutor: taskExecutor)
            } else {
                job.runSynchronously(on: executor)
            }
        }
    }

    /// Has `object.finishBeforeWaiting()` called once this loop iteration's work is done, just before the
    /// loop waits for I/O again (libuv's prepare phase; timers that fire first are included). For work that
    /// is cheaper done once for everything an iteration produced, like writing a connection's answers.
    @Loop public func finishBeforeWaiting(_ object: any FinishBeforeWaiting) {
        finishing.append(object)
    }

    private static let finishQueuedOnLoop = Loop.callable { (loop: EventLoop) in loop.finishQueued() }

    /// Calls `finishBeforeWaiting` on everything queued, and on what those calls queue in turn.
    @Loop private func finishQueued() {
        while !finishing.isEmpty {
            swap(&finishing, &draining)
            for object in draining { object.finishBeforeWaiting() }
            draining.removeAll(keepingCapacity: true)
        }
    }

    /// Milliseconds of the loop's cached clock (`uv_now`).
    public var now: UInt64 { uv_now(uv) }
}

/// Something with work left for the end of a loop iteration (`EventLoop.finishBeforeWaiting`).
@Loop public protocol FinishBeforeWaiting: AnyObject {
    /// Does the work; called on the loop just before it waits for I/O.
    func finishBeforeWaiting()
}

/// `EventLoop.shared` as a task executor: what it is given runs on the loop thread.
public final class LoopTaskExecutor: TaskExecutor, @unchecked Sendable {
    private unowned let loop: EventLoop

    fileprivate init(_ loop: EventLoop) {
        self.loop = loop
    }

    /// Queues `job` on the loop like `EventLoop.enqueue`, marked to run isolated to the loop with this as its task executor.
    public func enqueue(_ job: consuming ExecutorJob) {
        loop.enqueue(UnownedJob(job), preferring: true)
    }
}

/// The global actor of everything that lives on the uv loop: handles, connections, pools, routes.
@globalActor
public actor Loop {
    /// The actor `@Loop` names; it holds no state, its executor is `EventLoop.shared`.
    public static let shared = Loop()

    /// `EventLoop.shared`, so `@Loop` code runs on the uv loop thread.
    public nonisolated var unownedExecutor: UnownedSerialExecutor {
        EventLoop.shared.asUnownedSerialExecutor()
    }

    /// Runs `operation` as `@Loop` code from a synchronous context already on the loop thread, such as a
    /// libuv or libcurl callback. Traps when called from any other thread.
    public static func assumeIsolated<T>(_ operation: @Loop () throws -> T) rethrows -> T {
        EventLoop.shared.checkIsolated()
        typealias Isolated = @Loop () throws -> T
        typealias Plain = () throws -> T
        return try withoutActuallyEscaping(operation) { isolated in
            try unsafeBitCast(isolated, to: Plain.self)()
        }
    }

    /// `operation` as a plain function, for a C callback on the loop thread to call after
    /// `EventLoop.shared.checkIsolated()` (typed `@Sendable` so a static can hold it: only that check makes
    /// calling it safe). Made once (kept in a static), it costs nothing per call, where
    /// `assumeIsolated(_:)` allocates a context for its closure every time: for callbacks that run once per
    /// request or more (a socket read).
    public static func callable<Argument>(_ operation: @escaping @Loop (Argument) -> Void) -> @Sendable (Argument) -> Void {
        unsafeBitCast(operation, to: (@Sendable (Argument) -> Void).self)
    }
}
