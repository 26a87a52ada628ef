import CUV
import Testing
@testable import AppStore
@testable import EntitlementService
@testable import FakeAppStore
@testable import ServiceRuntime

/// The Prometheus registry and the loop lag probe.
@Suite struct HTTPMetricsTests {
    @Test @Loop func rendersCountersHistogramsAndGauges() {
        let metrics = Metrics()
        metrics.recordRequest(route: "/a", method: "GET", status: 200, durationSeconds: 0.003)
        metrics.recordRequest(route: "/a", method: "GET", status: 200, durationSeconds: 0.2)
        metrics.recordRequest(route: "rejected", method: "-", status: 400, durationSeconds: nil)
        metrics.gauge("db_pool_in_use", "Connections in use.", labels: ["pool": "main \"1\""]) { 3 }
        metrics.gauge("db_pool_in_use", "Connections in use.", labels: ["pool": "jobs"]) { 1.5 }
        let text = metrics.render()
        #expect(text.contains(#"http_requests_total{route="/a",method="GET",status="200"} 2"#))
        #expect(text.contains(#"http_requests_total{route="rejected",method="-",status="400"} 1"#))
        #expect(text.contains(#"http_request_duration_seconds_bucket{route="/a",le="0.001"} 0"#))
        #expect(text.contains(#"http_request_duration_seconds_bucket{route="/a",le="0.005"} 1"#))
        #expect(text.contains(#"http_request_duration_seconds_bucket{route="/a",le="0.25"} 2"#))
        #expect(text.contains(#"http_request_duration_seconds_bucket{route="/a",le="+Inf"} 2"#))
        #expect(text.contains(#"http_request_duration_seconds_sum{route="/a"} 0.203"#))
        #expect(text.contains(#"http_request_duration_seconds_count{route="/a"} 2"#))
        #expect(!text.contains(#"http_request_duration_seconds_count{route="rejected"}"#))
        #expect(text.components(separatedBy: "# TYPE db_pool_in_use gauge").count == 2)
        #expect(text.contains(#"db_pool_in_use{pool="main \"1\""} 3"#))
        #expect(text.contains(#"db_pool_in_use{pool="jobs"} 1.5"#))
        #expect(text.hasSuffix("\n"))
    }

    @Test @Loop func loopLagIsMeasuredWhenTheLoopIsBlocked() async {
        let metrics = Metrics()
        let monitor = LoopLagMonitor(intervalMilliseconds: 10, window: 50)
        monitor.start(registering: metrics)
        defer { monitor.stop() }
        // Keep the loop busy for 100 ms: the probe fires that much late.
        let busyUntil = uv_hrtime() + 100_000_000
        while uv_hrtime() < busyUntil {}
        let deadline = uv_hrtime() + 5_000_000_000
        while monitor.maxLag < 0.05 && uv_hrtime() < deadline {
            await LoopTimer.sleep(milliseconds: 5)  // lets the probe run; the deadline bounds the wait
        }
        #expect(monitor.maxLag >= 0.05)
        #expect(metrics.render().contains("# TYPE event_loop_lag_max_seconds gauge"))
    }
}
