import Testing
@testable import AppStore
@testable import EntitlementService
@testable import FakeAppStore
@testable import ServiceRuntime

@Suite struct EventLoopTests {
    @Test func asyncCodeResumesOnTheLoopThread() async {
        let onLoop = await Task { @Loop in EventLoop.shared.inLoopThread }.value
        #expect(onLoop)
        #expect(!EventLoop.shared.inLoopThread)
    }

    @Test @Loop func timersFireInTheOrderOfTheirDelays() async {
        // Started together, in one loop turn, so they share the loop's clock.
        let delays = [30, 10, 20]
        let timers = delays.map { _ in LoopTimer() }
        var fired: [Int] = []
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            for (timer, delay) in zip(timers, delays) {
                timer.start(after: UInt64(delay)) {
                    fired.append(delay)
                    if fired.count == delays.count { done.resume() }
                }
            }
        }
        timers.forEach { $0.close() }
        #expect(fired == [10, 20, 30])
    }

    /// Records its name when finished and runs `then` (which may queue more).
    @Loop private final class Finisher: FinishBeforeWaiting {
        let name: String
        var then: () -> Void = {}
        private let record: (String) -> Void
        init(_ name: String, _ record: @escaping (String) -> Void) {
            self.name = name
            self.record = record
        }
        func finishBeforeWaiting() {
            record(name)
            then()
        }
    }

    @Test @Loop func queuedWorkIsFinishedBeforeTheLoopWaitsAgain() async {
        var order: [String] = []
        let timer = LoopTimer()
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            let first = Finisher("first") { order.append($0) }
            let second = Finisher("second") { order.append($0) }
            first.then = {
                // Queued while finishing: it runs in the same pass, before the loop waits and so before any
                // timer of the next iteration.
                timer.start(after: 0) {
                    order.append("timer")
                    done.resume()
                }
                EventLoop.shared.finishBeforeWaiting(second)
            }
            EventLoop.shared.finishBeforeWaiting(first)
            order.append("queued")
        }
        timer.close()
        #expect(order == ["queued", "first", "second", "timer"])
    }

    @Test func logValuesCannotBreakTheLine() {
        let line = String(decoding: Log.line(.info, "e", ["a": "plain", "b": "a b", "c": "x\ny=\"1\"", "d": nil]), as: UTF8.self)
        #expect(line.hasPrefix("ts="))
        #expect(line.hasSuffix(#" level=info event=e a=plain b="a b" c="x\ny=\"1\"""# + "\n"))
        #expect(line.filter { $0 == "\n" }.count == 1)
        // Unicode's line and paragraph separators and NEL (a user id may hold them) are escaped too: no tool that
        // splits lines on them sees a forged line; other text stays as it is.
        let forged = String(decoding: Log.line(.info, "e", ["u": "x\u{2028}ts=1 level=error event=forged\u{2029}\u{85}", "v": "é"]), as: UTF8.self)
        #expect(forged.hasSuffix(#" u="x\u{2028}ts=1 level=error event=forged\u{2029}\u{85}" v="é""# + "\n"), "\(forged)")
        #expect(forged.split(whereSeparator: \.isNewline).count == 1)
    }

    /// Lines logged for a request carry its id once, whether or not they name it.
    @Test func linesLoggedForARequestCarryItsID() {
        let lines = Log.$requestID.withValue("req-7") {
            [Log.line(.info, "e", ["a": "1"]), Log.line(.info, "e", ["request_id": "other", "a": "1"])].map { String(decoding: $0, as: UTF8.self) }
        }
        #expect(lines[0].hasSuffix(" event=e a=1 request_id=req-7\n"))
        #expect(lines[1].hasSuffix(" event=e request_id=other a=1\n"))
        #expect(!String(decoding: Log.line(.info, "e", ["a": "1"]), as: UTF8.self).contains("request_id"))
    }

    @Test func typedLogFieldsAreFormattedInPlace() throws {
        var line = try #require(Log.Line(.error, "done"))
        line.add("status", -404)
        line.add("duration_ms", milliseconds: 12_345_678)
        line.add("quick_ms", milliseconds: 7_000)
        line.add("id", "a=b")
        let text = String(decoding: line.finished(), as: UTF8.self)
        #expect(text.hasSuffix(#" level=error event=done status=-404 duration_ms=12.345 quick_ms=0.007 id="a=b""# + "\n"))
    }
}
