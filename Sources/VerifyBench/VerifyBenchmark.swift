import AppStore
import FakeAppStore
import ServiceRuntime
import CUV
import EntitlementModel
import Foundation

/// `verify-bench`: starts `--count` receipt verifications at once through `HTTPClient` and
/// `AppStoreClient` on the one loop, against a (fake) verifyReceipt endpoint, and prints how long they took
/// compared with the endpoint's latency, the process's peak RSS and the worst loop stall meanwhile.
///
///     bench-verify --production-url URL --sandbox-url URL --latency-ms MS
///                  [--count 1000] [--periods 12] [--ca-bundle PEM] [--secret S] [--timeout-ms 30000]
///
/// Every verification posts the same fake receipt: a consumable, a lifetime purchase and a monthly
/// subscription renewed for `--periods` months (12: about 28 KB of answer, as for a year-old subscriber).
/// Output is one line of `key=value` pairs: `count`, `verified`, `retry_later`, `rejected`,
/// `configuration_error`, `wall_ms`, `latency_ms`, `ratio` (`(wall - latency) / latency`), `cpu_ms` (the
/// process's user and system CPU time during the run, which other load on the machine does not inflate),
/// `peak_rss_kb` (`VmHWM`) and `max_loop_stall_ms` (the latest a 10 ms loop timer ran). The exit status is 0
/// when every verification was verified, 1 otherwise, 2 for bad arguments.
enum VerifyBenchmark {
    struct Options: Equatable {
        var productionURL: String
        var sandboxURL: String
        var latencyMs: Int
        var count = 1_000
        var periods = 12
        var caBundle: String?
        var secret: String?
        var timeoutMs = 30_000
    }

    /// Runs the benchmark with the command's arguments (after the program name) and returns the exit status.
    @Loop static func run(arguments: [String]) async -> Int32 {
        let options: Options
        do {
            options = try parse(arguments)
        } catch {
            FileHandle.standardError.write(Data("verify-bench: \(error.message)\n".utf8))
            return 2
        }
        let client = HTTPClient(configuration: HTTPClientConfiguration(
            caBundlePath: options.caBundle ?? HTTPClientConfiguration().caBundlePath,
            maxConnections: options.count + 16, maxHostConnections: 0,
            connectTimeoutMs: options.timeoutMs, totalTimeoutMs: options.timeoutMs))
        let verifier = AppStoreClient(http: client, settings: AppStoreSettings(
            productionURL: options.productionURL, sandboxURL: options.sandboxURL, sharedSecret: options.secret))
        let receiptData = sampleReceipt(periods: options.periods).receiptData

        let monitor = LoopLagMonitor(intervalMilliseconds: 10, window: 100_000)
        monitor.start(registering: Metrics())
        let cpuBefore = cpuMilliseconds()
        let started = uv_hrtime()
        let tasks = (0..<options.count).map { _ in
            Task.onLoop { await verifier.verify(receiptData: receiptData, firstEnvironment: .production) }
        }
        var results: [VerificationFlow.Result] = []
        for task in tasks { results.append(await task.value) }
        let wallMs = Double(uv_hrtime() - started) / 1e6
        let cpuMs = cpuMilliseconds() - cpuBefore
        monitor.stop()

        var tally = ["verified": 0, "retry_later": 0, "rejected": 0, "configuration_error": 0]
        for result in results {
            switch result {
            case .verified: tally["verified"]! += 1
            case .retryLater: tally["retry_later"]! += 1
            case .rejected: tally["rejected"]! += 1
            case .configurationError: tally["configuration_error"]! += 1
            }
        }
        let ratio = (wallMs - Double(options.latencyMs)) / Double(max(1, options.latencyMs))
        print([
            "count=\(options.count)", "verified=\(tally["verified"]!)", "retry_later=\(tally["retry_later"]!)",
            "rejected=\(tally["rejected"]!)", "configuration_error=\(tally["configuration_error"]!)",
            "wall_ms=\(format(wallMs))", "latency_ms=\(options.latencyMs)", "ratio=\(format(ratio, digits: 3))", "cpu_ms=\(format(cpuMs))",
            "peak_rss_kb=\(peakRSSKilobytes() ?? -1)", "max_loop_stall_ms=\(format(monitor.maxLag * 1_000))",
        ].joined(separator: " "))
        return tally["verified"] == options.count ? 0 : 1
    }

    /// A receipt with a consumable, a lifetime purchase and a monthly subscription renewed `periods` times.
    static func sampleReceipt(periods: Int) -> FakeReceipt {
        let start = Date(timeIntervalSince1970: 1_767_225_600)  // 2026-01-01T00:00:00Z
        var receipt = FakeReceipt(bundleID: "com.example.app", environment: .production)
        receipt.addPurchase("com.example.coins.100", transactionID: "2000000001", purchased: start)
        receipt.addPurchase("com.example.lifetime", transactionID: "2000000002", purchased: start)
        receipt.addSubscription("com.example.premium.monthly", originalTransactionID: "2000000003", start: start,
                                period: ISODuration(months: 1), periods: periods)
        return receipt
    }

    static func parse(_ arguments: [String]) throws(VerifyBenchmarkError) -> Options {
        var values: [String: String] = [:]
        var index = 0
        let known = ["--production-url", "--sandbox-url", "--latency-ms", "--count", "--periods", "--ca-bundle", "--secret", "--timeout-ms"]
        while index < arguments.count {
            let option = arguments[index]
            guard known.contains(option) else { throw VerifyBenchmarkError(message: "unknown option '\(option)'") }
            guard index + 1 < arguments.count else { throw VerifyBenchmarkError(message: "\(option) needs a value") }
            values[option] = arguments[index + 1]
            index += 2
        }
        func integer(_ option: String, _ range: ClosedRange<Int>) throws(VerifyBenchmarkError) -> Int? {
            guard let text = values[option] else { return nil }
            guard let value = Int(text), range.contains(value) else {
                throw VerifyBenchmarkError(message: "\(option) expects an integer in \(range.lowerBound)...\(range.upperBound), got '\(text)'")
            }
            return value
        }
        guard let production = values["--production-url"], let sandbox = values["--sandbox-url"] else {
            throw VerifyBenchmarkError(message: "--production-url and --sandbox-url are required")
        }
        guard let latency = try integer("--latency-ms", 0...600_000) else {
            throw VerifyBenchmarkError(message: "--latency-ms (the endpoint's latency) is required")
        }
        var options = Options(productionURL: production, sandboxURL: sandbox, latencyMs: latency)
        options.count = try integer("--count", 1...100_000) ?? options.count
        options.periods = try integer("--periods", 1...1_000) ?? options.periods
        options.timeoutMs = try integer("--timeout-ms", 1...600_000) ?? options.timeoutMs
        options.caBundle = values["--ca-bundle"]
        options.secret = values["--secret"]
        return options
    }

    /// The process's peak resident set size (`VmHWM` in /proc/self/status), in kilobytes.
    static func peakRSSKilobytes() -> Int? {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
              let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmHWM:") })
        else { return nil }
        return Int(line.dropFirst("VmHWM:".count).split(whereSeparator: { $0 == " " || $0 == "\t" }).first ?? "")
    }

    /// User plus system CPU time of the process so far, in milliseconds.
    static func cpuMilliseconds() -> Double {
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        func milliseconds(_ time: timeval) -> Double { Double(time.tv_sec) * 1_000 + Double(time.tv_usec) / 1_000 }
        return milliseconds(usage.ru_utime) + milliseconds(usage.ru_stime)
    }

    private static func format(_ value: Double, digits: Int = 1) -> String {
        String(format: "%.\(digits)f", value)
    }
}

/// A verify-bench command line that could not be understood.
struct VerifyBenchmarkError: Error, Equatable {
    var message: String
}
