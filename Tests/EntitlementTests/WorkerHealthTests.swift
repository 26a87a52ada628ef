import Testing
@testable import EntitlementService

/// A background worker's failures are reported when they begin and when they end, never at every run.
@Suite struct WorkerHealthTests {
    @Test func successesReportNothing() {
        var health = WorkerHealth()
        #expect(health.runSucceeded() == nil)
        #expect(health.runSucceeded() == nil)
        #expect(health.failedRuns == 0)
    }

    @Test func anOutageIsReportedOnceWithItsFirstErrorAndOnceWhenItEnds() {
        var health = WorkerHealth()
        #expect(health.runSucceeded() == nil)
        #expect(health.runFailed("connection refused") == .failing(error: "connection refused"))
        for _ in 0..<100 { #expect(health.runFailed("connection refused") == nil) }
        #expect(health.runFailed("another error") == nil)
        #expect(health.failedRuns == 102)
        #expect(health.runSucceeded() == .recovered(failedRuns: 102))
        #expect(health.runSucceeded() == nil)
        #expect(health.failedRuns == 0)
    }

    @Test func aFailureAtStartIsReportedAndEachNewOutageAgain() {
        var health = WorkerHealth()
        #expect(health.runFailed("down") == .failing(error: "down"))
        #expect(health.runSucceeded() == .recovered(failedRuns: 1))
        #expect(health.runFailed("down again") == .failing(error: "down again"))
        #expect(health.runFailed("down again") == nil)
        #expect(health.runSucceeded() == .recovered(failedRuns: 2))
    }
}
