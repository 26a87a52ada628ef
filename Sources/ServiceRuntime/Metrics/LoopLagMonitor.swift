import CUV

/// Measures how late the loop runs a repeating timer: the time callbacks and jobs keep the loop busy.
///
/// Exposes `event_loop_lag_seconds` (the latest sample) and `event_loop_lag_max_seconds` (the largest of the
/// last `window` samples).
@Loop
public final class LoopLagMonitor {
    private let intervalNanoseconds: UInt64
    private let timer = LoopTimer()
    private var samples: [Double]
    private var next = 0
    private var previousFire: UInt64 = 0

    /// Samples every `intervalMilliseconds`; the max gauge covers the last `window` samples.
    public init(intervalMilliseconds: UInt64 = 100, window: Int = 100) {
        intervalNanoseconds = intervalMilliseconds * 1_000_000
        samples = [Double](repeating: 0, count: max(1, window))
    }

    /// The latest lag, in seconds.
    public var lastLag: Double { samples[(next + samples.count - 1) % samples.count] }

    /// The largest lag of the window, in seconds.
    public var maxLag: Double { samples.max() ?? 0 }

    /// Starts sampling and registers the gauges with `metrics`, which keeps the monitor alive.
    public func start(registering metrics: Metrics = .shared) {
        metrics.gauge("event_loop_lag_seconds", "How late the latest loop lag probe ran.") { self.lastLag }
        metrics.gauge("event_loop_lag_max_seconds", "The largest loop lag of the recent probes.") { self.maxLag }
        previousFire = uv_hrtime()
        let milliseconds = intervalNanoseconds / 1_000_000
        timer.start(after: milliseconds, repeat: milliseconds) { self.sample() }
    }

    /// Stops sampling for good.
    public func stop() {
        timer.close()
    }

    private func sample() {
        let now = uv_hrtime()
        let late = now > previousFire + intervalNanoseconds ? now - previousFire - intervalNanoseconds : 0
        previousFire = now
        samples[next] = Double(late) / 1e9
        next = (next + 1) % samples.count
    }
}
