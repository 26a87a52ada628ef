import EntitlementModel
import Foundation
import Testing
@testable import AppStore
@testable import EntitlementService
@testable import FakeAppStore
@testable import ServiceRuntime

/// The purchase side without HTTP and without background workers: a migrated database of its own, a pool,
/// the catalog of `ServiceHarness`, and `ReceiptService`s (as many as a test wants "instances") asking a
/// `ScriptedVerifier` instead of Apple, so a test decides when each attempt gets which answer.
@Loop
final class PurchaseStack: ServiceDatabase {
    let databaseURL: String
    let pool: PostgresPool
    let catalog: CatalogCache

    private init(databaseURL: String, pool: PostgresPool, catalog: CatalogCache) {
        self.databaseURL = databaseURL
        self.pool = pool
        self.catalog = catalog
    }

    /// Runs `body` against a fresh stack, dropped afterwards however `body` ends.
    static func run<T>(_ body: (PurchaseStack) async throws -> T) async throws -> T {
        try await TestDatabase.withTemporaryDatabase { url in
            let pool = PostgresPool(conninfo: url, size: 4)
            let catalogFile = FileManager.default.temporaryDirectory.appendingPathComponent("catalog-\(randomToken()).json")
            defer { try? FileManager.default.removeItem(at: catalogFile) }
            return try await withHarness(start: {
                _ = try await Migrator(pool: pool, directory: Migrator.defaultDirectory()).run()
                try Data(ServiceHarness.catalog.utf8).write(to: catalogFile)
                let catalog = CatalogCache(db: pool)
                _ = try await CatalogEditor(db: pool, catalog: catalog).importFile(catalogFile.path)
                return PurchaseStack(databaseURL: url, pool: pool, catalog: catalog)
            }, stop: { _ in await pool.close() }, body)
        }
    }

    /// One instance of the receipt service on this database, asking `verifier`.
    func service(_ verifier: ScriptedVerifier, restorePolicy: RestorePolicy = .transfer) -> ReceiptService {
        ReceiptService(db: pool, catalog: catalog, verifier: verifier, restorePolicy: restorePolicy,
                       retry: RetrySchedule(baseMs: 100, maxMs: 400), appleTimeoutMs: 3_000,
                       events: EventRecorder(catalog: catalog, delivers: false))
    }
}

/// A `ReceiptVerifier` whose answers a test scripts: queued answers are given in order, and after
/// `holdNextCall()` the next call waits until the test releases it, so a test can keep an attempt "at Apple"
/// as long as it likes. A call nothing was scripted for is an issue (answered "retry later"), never a hang.
@Loop
final class ScriptedVerifier: ReceiptVerifier {
    private var answers: [VerificationFlow.Result] = []
    private var holds = 0
    private var held: [CheckedContinuation<VerificationFlow.Result, Never>] = []
    private var arrivals: [CheckedContinuation<Void, Never>] = []
    /// Every call so far: the receipt asked about and the environment asked first.
    private(set) var calls: [(receiptData: String, environment: StoreEnvironment)] = []

    /// Gives `answer` to the next call not held.
    func enqueue(_ answer: VerificationFlow.Result) {
        answers.append(answer)
    }

    /// Makes the next call wait for `release(_:)`.
    func holdNextCall() {
        holds += 1
    }

    func verify(receiptData: String, firstEnvironment: StoreEnvironment) async -> VerificationFlow.Result {
        calls.append((receiptData, firstEnvironment))
        if holds > 0 {
            holds -= 1
            return await withCheckedContinuation { continuation in
                held.append(continuation)
                let waiting = arrivals
                arrivals.removeAll()
                for arrival in waiting { arrival.resume() }
            }
        }
        guard !answers.isEmpty else {
            Issue.record("the verifier was asked about a receipt nothing was scripted for")
            return .retryLater(appleStatus: nil, reason: "unscripted")
        }
        return answers.removeFirst()
    }

    /// Returns once a held call waits for `release(_:)`.
    func awaitHeldCall() async {
        guard held.isEmpty else { return }
        await withCheckedContinuation { arrivals.append($0) }
    }

    /// Answers the oldest held call with `answer`.
    func release(_ answer: VerificationFlow.Result) {
        held.removeFirst().resume(returning: answer)
    }
}

extension FakeReceipt {
    /// The status-0 answer Apple would give for this receipt, as the verifier hands it over.
    func verified(now: Date = Date()) throws -> VerificationFlow.Result {
        let body = verifyReceiptBody(receiptData: receiptData, requestDate: now, excludeOldTransactions: false)
        return .verified(try AppStoreResponse(jsonData: Data(body.jsonText.utf8)), environment: environment)
    }
}

extension TestDatabase {
    /// Stores the harness's catalog (`ServiceHarness.catalog`) at `pool`, product by product, as writers read it.
    @Loop static func storeHarnessCatalog(on pool: PostgresPool) async throws {
        for product in try Catalog(json: Data(ServiceHarness.catalog.utf8)).products {
            try await ProductStore().upsert(product, on: pool)
        }
    }
}
