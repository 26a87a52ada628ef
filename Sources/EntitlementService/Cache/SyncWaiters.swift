import ServiceRuntime

/// The sync tokens this process sent and is waiting to hear back on the listener, each awaited by one barrier.
///
/// A token is `expect`ed before it is sent, since the listener may hear it before the sender's own query has
/// answered; `wait` then returns true once it `arrived`, false after the timeout or when `abandonAll()` gives up
/// on every token (the listener lost its connection).
@Loop
final class SyncWaiters {
    private enum State {
        case expected
        case arrived
        case waiting(CheckedContinuation<Bool, Never>, LoopTimer)
    }

    private var tokens: [String: State] = [:]

    /// The number of tokens sent and not yet settled.
    var count: Int { tokens.count }

    /// Notes that `token` is about to be sent.
    func expect(_ token: String) {
        tokens[token] = .expected
    }

    /// Gives up on `token` (it could not be sent).
    func forget(_ token: String) {
        settle(token, arrived: false)
    }

    /// The listener heard `token`; tokens this process is not waiting for (other instances' ones) are ignored.
    func arrived(_ token: String) {
        switch tokens[token] {
        case .expected: tokens[token] = .arrived
        case .waiting: settle(token, arrived: true)
        case .arrived, nil: break
        }
    }

    /// Waits until `token` arrives (true), or `timeoutMs` passes or it is abandoned (false).
    func wait(for token: String, timeoutMs: UInt64) async -> Bool {
        switch tokens[token] {
        case .arrived:
            tokens[token] = nil
            return true
        case .waiting, nil:
            return false
        case .expected:
            return await withCheckedContinuation { continuation in
                let timer = LoopTimer()
                tokens[token] = .waiting(continuation, timer)
                timer.start(after: timeoutMs) { [weak self] in self?.settle(token, arrived: false) }
            }
        }
    }

    /// Every token is given up: waiting barriers return false, and tokens still being sent will.
    func abandonAll() {
        for token in Array(tokens.keys) { settle(token, arrived: false) }
    }

    private func settle(_ token: String, arrived: Bool) {
        guard let state = tokens.removeValue(forKey: token) else { return }
        if case .waiting(let continuation, let timer) = state {
            timer.close()
            continuation.resume(returning: arrived)
        }
    }
}
