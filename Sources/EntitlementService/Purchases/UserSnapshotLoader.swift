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
    /// The most users read in one batch. Small batches keep both connections' work even and come back while
    /// the service still answers the other batch: with a cap of 64, the reads piling up behind one slow full
    /// batch went out as the next full one while the other connection carried single reads, and one PostgreSQL
    /// backend did nearly all the work. Measured with 64 clients on two cores (`bench/entitlements/compare.sh`):
    /// 10 gave 1.21× the reads/s of 64 (via 16), 1.03× those of 8 and 1.07× those of 6.
    static let maxBatch = 10

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
        Task.onLoop {
            var users: [String] = []
            var seen: Set<String> = []
            for (userID, _) in batch where seen.insert(userID).inserted { users.append(userID) }
            let snapshots: Result<[String: UserSnapshot], any Error>
            do {
                snapshots = .success(try await self.store.snapshots(of: users, on: self.pool))
            } catch {
                snapshots = .failure(error)
            }
            // The connection is free again: the next batch is sent before this one's readers are resumed, so
            // PostgreSQL works on it while they evaluate and answer (they run after the send, in queue order).
            self.batchesOut -= 1
            self.sendIfFree()
            await self.deliver(snapshots, to: batch)
        }
    }

    private func deliver(
        _ snapshots: Result<[String: UserSnapshot], any Error>,
        to batch: [(userID: String, continuation: CheckedContinuation<UserSnapshot, any Error>)]
    ) async {
        switch snapshots {
        case .success(let snapshots):
            for (userID, continuation) in batch { continuation.resume(returning: snapshots[userID]!) }
        case .failure(let error):
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
