import EntitlementModel
import FakeAppStore
import Foundation
import Testing
@testable import EntitlementService
@testable import ServiceRuntime

/// Entitlement reads batched across callers: each caller gets its own user's snapshot, whoever it shared the
/// batch with.
@Suite(.serialized)
@Loop
struct UserSnapshotLoaderTests {
    @Test func concurrentReadsShareBatchesAndEachGetsItsOwnUser() async throws {
        try await ServiceHarness.run { service in
            // Twelve users with one grant each, named after them; a thirteenth user owns nothing.
            for index in 0..<12 {
                let granted = try await service.request("POST", "/v1/admin/users/batch-\(index)/grants",
                                                        json: #"{"entitlement": "e\#(index)", "reason": "r\#(index)"}"#,
                                                        key: ServiceHarness.adminKey)
                #expect(granted.status == 201, "\(granted.text)")
            }
            // Three of them also bought 100 coins: a transaction and a balance, rows of the other two tables.
            let buyers = ["batch-2": "8300002", "batch-5": "8300005", "batch-9": "8300009"]
            for (user, transactionID) in buyers {
                var receipt = FakeReceipt(bundleID: ServiceHarness.bundleID)
                receipt.addPurchase("com.example.coins.100", transactionID: transactionID, purchased: Date().addingTimeInterval(-60))
                #expect(try await service.post(receipt, for: user).status == 200)
            }
            let loader = service.application.snapshots
            let before = loader.readsBatched
            // Every user asked for at once, some twice: the first reads go alone, the rest wait and go together.
            let users = (0..<13).map { "batch-\($0)" } + ["batch-3", "batch-12", "batch-7"]
            let reads = users.map { user in Task { @Loop in try await loader.snapshot(of: user) } }
            for (user, read) in zip(users, reads) {
                let snapshot = try await read.value
                if user == "batch-12" {
                    #expect(snapshot.grants.isEmpty && snapshot.transactions.isEmpty && snapshot.balances.isEmpty)
                } else {
                    let index = user.dropFirst("batch-".count)
                    #expect(snapshot.grants.map(\.entitlement) == ["e\(index)"], "\(user)")
                    #expect(snapshot.grants.allSatisfy { $0.userID == user && $0.reason == "r\(index)" }, "\(user)")
                }
                #expect(snapshot.transactions.map(\.transaction.transactionID) == buyers[user].map { [$0] } ?? [], "\(user)")
                #expect(snapshot.balances == (buyers[user] == nil ? [:] : ["coins": 100]), "\(user)")
            }
            // The first reads go alone, one per connection; the rest wait and go in batches of `minBatch` (so few
            // reads are in the loader that the share never exceeds it).
            let connections = service.application.readPool.size
            let waited = users.count - connections
            #expect(UserSnapshotLoader.batchSize(waiting: waited, out: 1, connections: connections) == UserSnapshotLoader.minBatch)
            let batches = (waited + UserSnapshotLoader.minBatch - 1) / UserSnapshotLoader.minBatch
            #expect(loader.readsBatched - before == waited - batches,
                    "all but the reads sent while connections were free went in batches of minBatch")
        }
    }

    /// The share: half of one connection's part of the reads in the loader, at least `minBatch` (or what waits),
    /// at most `maxBatch`.
    @Test func aBatchTakesHalfOfOneConnectionsShare() {
        #expect(UserSnapshotLoader.batchSize(waiting: 1, out: 0, connections: 2) == 1)
        #expect(UserSnapshotLoader.batchSize(waiting: 3, out: 10, connections: 2) == 3)
        #expect(UserSnapshotLoader.batchSize(waiting: 14, out: 1, connections: 2) == UserSnapshotLoader.minBatch)
        #expect(UserSnapshotLoader.batchSize(waiting: 30, out: 10, connections: 2) == 10)
        #expect(UserSnapshotLoader.batchSize(waiting: 30, out: 10, connections: 4) == 5)
        #expect(UserSnapshotLoader.batchSize(waiting: 200, out: 56, connections: 2) == UserSnapshotLoader.maxBatch)
    }

    /// A batch reads each user once; every read knows where its user's snapshot comes back.
    @Test func aBatchReadsEachUserOnceAndEveryReadFindsItsOwn() {
        let reads = ["b", "a", "b", "c", "a", "b"]
        let (users, positions) = UserSnapshotLoader.distinct(reads)
        #expect(users == ["b", "a", "c"])
        #expect(positions == [0, 1, 0, 2, 1, 0])
        #expect(positions.map { users[$0] } == reads)
        #expect(UserSnapshotLoader.distinct([]) == ([], []))
    }
}
