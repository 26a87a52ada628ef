@testable import ServiceRuntime

/// What a callback reported, in order, for a test to wait on: `take` suspends until an item matching its
/// condition has been recorded (or fails at its deadline), so tests wait on events, never on time.
@Loop
final class Inbox<Item> {
    private(set) var items: [Item] = []
    private var waiter: (matches: (Item) -> Bool, continuation: CheckedContinuation<Void, any Error>, timer: LoopTimer)?

    /// Adds `item`, waking a `take` it satisfies.
    func record(_ item: Item) {
        items.append(item)
        guard let waiter, waiter.matches(item) else { return }
        self.waiter = nil
        waiter.timer.close()
        waiter.continuation.resume()
    }

    /// Removes and returns every item up to and including the first that `matches`, waiting for one for at
    /// most `timeoutMs`; throws when none came in time.
    func take(timeoutMs: UInt64 = 10_000, _ what: String, where matches: @escaping (Item) -> Bool) async throws -> [Item] {
        if !items.contains(where: matches) {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let timer = LoopTimer()
                waiter = (matches, continuation, timer)
                timer.start(after: timeoutMs) { [weak self] in
                    guard let self, let waiter = self.waiter else { return }
                    self.waiter = nil
                    waiter.timer.close()
                    waiter.continuation.resume(throwing: TestSetupError("\(what) did not happen within \(timeoutMs) ms"))
                }
            }
        }
        let end = items.firstIndex(where: matches)!
        defer { items.removeFirst(end + 1) }
        return Array(items[...end])
    }
}
