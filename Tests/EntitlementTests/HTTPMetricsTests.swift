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

    /// Each route counts its requests by method and status, aborted ones apart; lines come sorted by route,
    /// method and status (aborted first), whatever the order requests came in.
    @Test @Loop func requestCountsAreSortedByRouteMethodAndStatus() {
        let metrics = Metrics()
        for (route, method, status) in [("/b", "GET", 200), ("/a", "POST", 201), ("/a", "GET", 404), ("/a", "GET", 200),
                                        ("/a", "GET", nil), ("/b", "GET", 200), ("/a", "GET", 200)] as [(String, String, Int?)] {
            metrics.recordRequest(route: route, method: method, status: status, durationSeconds: 0.001)
        }
        let lines = metrics.render().split(separator: "\n").filter { $0.hasPrefix("http_requests_total{") }
        #expect(lines == [
            #"http_requests_total{route="/a",method="GET",status="aborted"} 1"#,
            #"http_requests_total{route="/a",method="GET",status="200"} 2"#,
            #"http_requests_total{route="/a",method="GET",status="404"} 1"#,
            #"http_requests_total{route="/a",method="POST",status="201"} 1"#,
            #"http_requests_total{route="/b",method="GET",status="200"} 2"#,
        ])
        #expect(metrics.render().contains(#"http_request_duration_seconds_count{route="/a"} 5"#))
    }

    @Test @Loop func countsEventsByLabelAndSamplesCounters() {
        let metrics = Metrics()
        for _ in 0..<3 { metrics.increment("receipt_verifications_total", "Attempts.", labels: ["outcome": "verified", "apple_status": "0"]) }
        metrics.increment("receipt_verifications_total", "Attempts.", labels: ["outcome": "retry_later", "apple_status": "none"])
        metrics.increment("receipt_verifications_total", "Attempts.", labels: ["outcome": "rejected", "apple_status": "21003"])
        metrics.counter("process_cpu_seconds_total", "CPU time.") { 1.25 }
        let text = metrics.render()
        #expect(text.contains("""
            # HELP receipt_verifications_total Attempts.
            # TYPE receipt_verifications_total counter
            receipt_verifications_total{outcome="rejected",apple_status="21003"} 1
            receipt_verifications_total{outcome="retry_later",apple_status="none"} 1
            receipt_verifications_total{outcome="verified",apple_status="0"} 3

            """))
        #expect(text.contains("# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total 1.25\n"))
    }

    /// /proc/self/stat's fields are counted after the command name, which may hold spaces and parentheses.
    @Test func procStatIsParsedAfterTheCommandName() throws {
        let line = "4242 (odd) name (x)) S 1 4242 4242 0 -1 4194560 2000 0 0 0 150 50 0 0 20 0 9 0 123456 500000000 3000 "
            + "18446744073709551615 1 1 0 0 0 0 0 4096 0 0 0 17 1 0 0 0 0 0\n"
        let stat = try #require(ProcessMetrics.ProcStat.parse(line))
        #expect(stat == ProcessMetrics.ProcStat(cpuTicks: 200, startTicks: 123_456, residentPages: 3_000))
        #expect(ProcessMetrics.ProcStat.parse("4242 (cut") == nil)
        let own = try #require(ProcessMetrics.ProcStat.read())
        #expect(own.residentPages > 0 && own.startTicks > 0)
        // /proc files claim a size of 0: read to the end, not one page (this process maps hundreds of areas).
        let maps = try #require(ProcessMetrics.contents(of: "/proc/self/maps"))
        #expect(maps.utf8.count > 8_192 && maps.hasSuffix("\n"))
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
