import Testing
@testable import EntitlementService

@Suite struct EventLoopTests {
    @Test func asyncCodeResumesOnTheLoopThread() async {
        let onLoop = await Task { @Loop in EventLoop.shared.inLoopThread }.value
        #expect(onLoop)
        #expect(!EventLoop.shared.inLoopThread)
    }

    @Test func timersFireInOrderOnTheLoop() async {
        let order = await Task { @Loop () -> [Int] in
            var fired: [Int] = []
            async let slow: Void = sleepThenRecord(30)
            async let fast: Void = sleepThenRecord(10)
            async let middle: Void = sleepThenRecord(20)
            _ = await (slow, fast, middle)
            fired = Self.recorded
            return fired
        }.value
        #expect(order == [10, 20, 30])
    }

    @Loop static var recorded: [Int] = []
    @Loop private func sleepThenRecord(_ delay: Int) async {
        await LoopTimer.sleep(milliseconds: UInt64(delay))
        Self.recorded.append(delay)
    }

    @Test func logValuesCannotBreakTheLine() {
        let line = String(decoding: Log.line(.info, "e", ["a": "plain", "b": "a b", "c": "x\ny=\"1\"", "d": nil]), as: UTF8.self)
        #expect(line.hasPrefix("ts="))
        #expect(line.hasSuffix(#" level=info event=e a=plain b="a b" c="x\ny=\"1\"""# + "\n"))
        #expect(line.filter { $0 == "\n" }.count == 1)
    }
}
