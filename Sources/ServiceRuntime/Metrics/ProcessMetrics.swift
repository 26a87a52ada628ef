import Foundation

/// The process figures Prometheus clients conventionally export, read from `/proc/self` at each scrape:
/// `process_cpu_seconds_total`, `process_resident_memory_bytes`, `process_open_fds`, `process_start_time_seconds`.
public enum ProcessMetrics {
    /// Registers the four metrics with `metrics`.
    @Loop
    public static func register(on metrics: Metrics) {
        let startTime = ProcStat.read().flatMap { stat in bootTime().map { $0 + stat.startTicks / clockTicks } } ?? 0
        metrics.counter("process_cpu_seconds_total", "User and system CPU time spent, in seconds.") {
            ProcStat.read().map { $0.cpuTicks / clockTicks } ?? 0
        }
        metrics.gauge("process_resident_memory_bytes", "Resident memory size in bytes.") {
            ProcStat.read().map { $0.residentPages * pageSize } ?? 0
        }
        metrics.gauge("process_open_fds", "Open file descriptors.") {
            // Less the one the listing itself opens.
            Double(max(0, ((try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd"))?.count ?? 1) - 1))
        }
        metrics.gauge("process_start_time_seconds", "Start time of the process since the Unix epoch, in seconds.") { startTime }
    }

    private static let clockTicks = Double(sysconf(Int32(_SC_CLK_TCK)))
    private static let pageSize = Double(sysconf(Int32(_SC_PAGESIZE)))

    /// The whole text of a /proc file, read until its end: such files claim a size of 0, and readers that
    /// trust the size stop after the first page.
    static func contents(of path: String) -> String? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 16_384)
        while true {
            let count = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { return count == 0 ? String(decoding: bytes, as: UTF8.self) : nil }
            bytes += chunk[..<count]
        }
    }

    /// The `btime` line of /proc/stat: when the machine booted, in seconds since the epoch.
    private static func bootTime() -> Double? {
        guard let text = contents(of: "/proc/stat") else { return nil }
        return text.split(separator: "\n").first { $0.hasPrefix("btime ") }.flatMap { Double($0.dropFirst(6)) }
    }

    /// The fields of /proc/self/stat these metrics use (see proc(5)).
    struct ProcStat: Equatable {
        /// utime + stime, in clock ticks.
        var cpuTicks: Double
        /// starttime: clock ticks after boot.
        var startTicks: Double
        /// rss, in pages.
        var residentPages: Double

        static func read() -> ProcStat? {
            contents(of: "/proc/self/stat").flatMap(parse)
        }

        /// Parses a stat line. The command name (field 2) is in parentheses and may hold spaces and
        /// parentheses itself, so fields are counted from the last `)`.
        static func parse(_ line: String) -> ProcStat? {
            guard let close = line.lastIndex(of: ")") else { return nil }
            // Field 3 (state) is the first after the name.
            let fields = line[line.index(after: close)...].split(separator: " ")
            func field(_ number: Int) -> Double? { fields.count > number - 3 ? Double(fields[number - 3]) : nil }
            guard let user = field(14), let system = field(15), let start = field(22), let rss = field(24) else { return nil }
            return ProcStat(cpuTicks: user + system, startTicks: start, residentPages: rss)
        }
    }
}
