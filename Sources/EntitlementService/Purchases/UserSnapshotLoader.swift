import ServiceRuntime

/// Reads users' snapshots for concurrent callers in batches: while as many batches as the pool has connections
/// are out, new reads wait, and the next batch takes all of them (up to `maxBatch`) in one read of each table
/// (`UserSnapshotStore.snapshots(of:on:)`). PostgreSQL's work per statement, and the service's per result, is
/// then paid once per batch instead of once per user. With nothing out, a read goes at once, alone.
///
/// The users of a batch share its snapshot, taken after each of them was asked for, so each sees at least what
/// it would have seen alone. When a batch of several fails, each of its users is read again on their own, so
/// that a failure reaches only the reads it belongs to.
@Loop
final class UserSnapshotLoader {
    /// The most users read in one batch.
    static let maxBatch = 64

    private let pool: PostgresPool
    private let store = UserSnapshotStore()
    private var waiting: [(userID: String, continuation: CheckedContinuation<UserSnapshot, any Error>)] = []
    private var batchesOut = 0
    /// Reads answered in a batch that also answered an earlier-queued read (for the metrics).
    private(set) var readsBatched = 0

    init(pool: PostgresPool) {
        self.pool = pool
    }

    /// The snapshot of `userID`, read alone or with the reads waiting beside it.
    func snapshot(of userID: String) async throws -> UserSnapshot {
        try await withCheckedThrowingContinuation { continuation in
            waiting.append((userID, continuation))
            sendIfFree()
        }
    }

    /// Sends the waiting reads as a batch when fewer batches than connections are out.
    private func sendIfFree() {
        guard !waiting.isEmpty, batchesOut < pool.size else { return }
        let batch = Array(waiting.prefix(Self.maxBatch))
        waiting.removeFirst(batch.count)
        batchesOut += 1
        readsBatched += batch.count - 1
        Task { @Loop in
            await self.read(batch)
            self.batchesOut -= 1
            self.sendIfFree()
        }
    }

    private func read(_ batch: [(userID: String, continuation: CheckedContinuation<UserSnapshot, any Error>)]) async {
        var users: [String] = []
        var seen: Set<String> = []
        for (userID, _) in batch where seen.insert(userID).inserted { users.append(userID) }
        do {
            let snapshots = try await store.snapshots(of: users, on: pool)
            for (userID, continuation) in batch { continuation.resume(returning: snapshots[userID]!) }
        } catch {
            guard batch.count > 1 else {
                batch[0].continuation.resume(throwing: error)
                return
            }
            for (userID, continuation) in batch {
                do {
                    continuation.resume(returning: try await store.snapshot(of: userID, on: pool))
                } catch {
                    continuation.resume(throwing: error)
                }
            }
        }
    }
}
