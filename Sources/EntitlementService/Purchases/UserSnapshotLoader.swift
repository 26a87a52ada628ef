import ServiceRuntime

/// Reads users' snapshots for concurrent callers in batches: while as many batches as the pool has connections
/// are out, new reads wait, and the next batch takes its share of them (`batchSize`) in one read of each table
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
    /// The fewest users a batch takes when more are waiting.
    static let minBatch = 4

    /// How many of the waiting reads the next batch takes: half of one connection's share of the reads in the
    /// loader (waiting, and out in batches), within `minBatch`…`maxBatch`.
    /// Each connection then has a batch at PostgreSQL and the next one forming, and full batches never pile
    /// onto one connection. Taking every waiting read instead, with 64 clients, the reads piling up behind a full
    /// batch went out as the next full one while the other connection carried single reads, and one PostgreSQL
    /// backend did nearly all the work. Measured on two cores (`bench/entitlements/compare.sh`, cold): against
    /// a fixed 10 (itself 1.21× the reads/s of taking all, with 64 clients), 1.099× with 16 clients, 1.003×
    /// with 64 and 1.176× with 256 (where a fixed 64 gave 0.967× of this).
    static func batchSize(waiting: Int, out: Int, connections: Int) -> Int {
        min(waiting, min(maxBatch, max(minBatch, (waiting + out) / (2 * connections))))
    }

    /// A caller's read: whose snapshot, and where to answer.
    private typealias Read = (userID: String, continuation: CheckedContinuation<UserSnapshot, any Error>)

    private let pool: PostgresPool
    private let store = UserSnapshotStore()
    private var waiting: [Read] = []
    private var batchesOut = 0
    /// Reads in the batches out.
    private var readsOut = 0
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
        let batch = Array(waiting.prefix(Self.batchSize(waiting: waiting.count, out: readsOut, connections: pool.size)))
        waiting.removeFirst(batch.count)
        batchesOut += 1
        readsOut += batch.count
        readsBatched += batch.count - 1
        Task.onLoop {
            let (users, positions) = Self.distinct(batch.map(\.userID))
            let snapshots: Result<[UserSnapshot], any Error>
            do {
                let read = try await self.store.snapshots(of: users, on: self.pool)
                snapshots = .success(positions.map { read[$0] })  // one per read of the batch, in its order
            } catch {
                snapshots = .failure(error)
            }
            // The connection is free again: the next batch is sent before this one's readers are resumed, so
            // PostgreSQL works on it while they evaluate and answer (they run after the send, in queue order).
            self.batchesOut -= 1
            self.readsOut -= batch.count
            self.sendIfFree()
            await self.deliver(snapshots, to: batch)
        }
    }

    /// A batch's users each once (a user asked for twice is read once), and the position among them of each
    /// read's user. By comparison, with nothing hashed: a batch holds at most `maxBatch` reads.
    static func distinct(_ userIDs: [String]) -> (users: [String], positions: [Int]) {
        var users: [String] = []
        users.reserveCapacity(userIDs.count)
        let positions = userIDs.map { userID in
            if let position = users.firstIndex(of: userID) { return position }
            users.append(userID)
            return users.count - 1
        }
        return (users, positions)
    }

    /// Answers each read of `batch` from `snapshots` (one per read, in order); when the batch failed, reads each
    /// user again alone.
    private func deliver(_ snapshots: Result<[UserSnapshot], any Error>, to batch: [Read]) async {
        switch snapshots {
        case .success(let snapshots):
            for (read, snapshot) in zip(batch, snapshots) { read.continuation.resume(returning: snapshot) }
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
