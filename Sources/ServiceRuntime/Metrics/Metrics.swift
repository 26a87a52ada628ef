/// The process's metrics, rendered in the Prometheus text format for `GET /metrics`.
///
/// HTTP traffic is recorded by the server's `HTTPRequestMetrics` (`http_requests_total`,
/// `http_request_duration_seconds`); other parts of the service count events by label (`increment`) or
/// register sampled values (pool sizes, loop lag, process figures) as closures read at each scrape.
/// Everything lives on the loop, so recording costs no lock.
@Loop
public final class Metrics {
    /// The registry `/metrics` serves.
    public static let shared = Metrics()

    /// The content type of `render()`'s output.
    public static let contentType = "text/plain; version=0.0.4; charset=utf-8"

    /// Upper bounds (seconds) of the request duration histogram's buckets.
    nonisolated static let durationBuckets: [Double] = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30]

    /// One route's answered requests, by method and status (nil: aborted without an answer), in the order they
    /// first came (a route sees a handful), and the handler times of its routed ones: one lookup by route per
    /// request.
    private struct RouteRecord {
        var counts: [(method: String, status: Int?, count: Int)] = []
        var durations: Histogram?

        mutating func record(method: String, status: Int?, durationSeconds: Double?) {
            if let index = counts.firstIndex(where: { $0.status == status && $0.method == method }) {
                counts[index].count += 1
            } else {
                counts.append((method, status, 1))
            }
            if let durationSeconds {
                if durations == nil { durations = Histogram() }
                durations!.observe(durationSeconds)
            }
        }
    }

    private struct Histogram {
        /// Observations per bucket (not cumulative); the last slot is +Inf.
        var counts = [Int](repeating: 0, count: Metrics.durationBuckets.count + 1)
        var sum = 0.0
        var count = 0

        mutating func observe(_ seconds: Double) {
            counts[Metrics.durationBuckets.firstIndex { seconds <= $0 } ?? Metrics.durationBuckets.count] += 1
            sum += seconds
            count += 1
        }
    }

    private struct Sampled {
        var name: String
        var help: String
        var type: String
        var labels: [String: String]
        var read: @Loop () -> Double
    }

    private struct Counter {
        var help: String
        var labelNames: [String]
        /// Counts by label values, in `labelNames`' order.
        var counts: [[String]: Int] = [:]
    }

    private var routes: [String: RouteRecord] = [:]
    private var counters: [String: Counter] = [:]
    private var sampled: [Sampled] = []

    /// An empty registry separate from `shared`, for a second server (the fake App Store) or a benchmark.
    public init() {}

    /// Counts one answered request (`status` nil: aborted without an answer, labelled `aborted`);
    /// `durationSeconds` (handler time) feeds the route's histogram when given.
    public func recordRequest(route: String, method: String, status: Int?, durationSeconds: Double?) {
        routes[route, default: RouteRecord()].record(method: method, status: status, durationSeconds: durationSeconds)
    }

    /// Adds one to the counter `name` for these label values. Every call for one name passes the same label
    /// names in the same order.
    public func increment(_ name: String, _ help: String, labels: KeyValuePairs<String, String> = [:]) {
        counters[name, default: Counter(help: help, labelNames: labels.map(\.key))].counts[labels.map(\.value), default: 0] += 1
    }

    /// Registers a gauge read at every scrape. Several registrations may share a name with different labels;
    /// registering the same name and labels again replaces the earlier one (a restarted component).
    public func gauge(_ name: String, _ help: String, labels: [String: String] = [:], _ read: @escaping @Loop () -> Double) {
        sample(name, help, type: "gauge", labels: labels, read)
    }

    /// Registers a counter kept elsewhere (such as the CPU time the kernel counts), read at every scrape; as
    /// `gauge` otherwise.
    public func counter(_ name: String, _ help: String, labels: [String: String] = [:], _ read: @escaping @Loop () -> Double) {
        sample(name, help, type: "counter", labels: labels, read)
    }

    private func sample(_ name: String, _ help: String, type: String, labels: [String: String], _ read: @escaping @Loop () -> Double) {
        sampled.removeAll { $0.name == name && $0.labels == labels }
        sampled.append(Sampled(name: name, help: help, type: type, labels: labels, read: read))
    }

    /// Every metric in the Prometheus text exposition format, in a stable order.
    public func render() -> String {
        var out = ""
        out += "# HELP http_requests_total HTTP requests answered, by route pattern, method and status.\n"
        out += "# TYPE http_requests_total counter\n"
        let counts = routes.flatMap { route, record in record.counts.map { (route: route, method: $0.method, status: $0.status, count: $0.count) } }
        for count in counts.sorted(by: { ($0.route, $0.method, $0.status ?? 0) < ($1.route, $1.method, $1.status ?? 0) }) {
            let labels = Self.labels([("route", count.route), ("method", count.method), ("status", count.status.map(String.init) ?? "aborted")])
            out += "http_requests_total\(labels) \(count.count)\n"
        }
        out += "# HELP http_request_duration_seconds Time from a complete request to its response, by route pattern.\n"
        out += "# TYPE http_request_duration_seconds histogram\n"
        for (route, record) in routes.sorted(by: { $0.key < $1.key }) {
            guard let histogram = record.durations else { continue }
            var cumulative = 0
            for (index, bound) in (Self.durationBuckets.map(Self.number) + ["+Inf"]).enumerated() {
                cumulative += histogram.counts[index]
                out += "http_request_duration_seconds_bucket\(Self.labels([("route", route), ("le", bound)])) \(cumulative)\n"
            }
            out += "http_request_duration_seconds_sum\(Self.labels([("route", route)])) \(Self.number(histogram.sum))\n"
            out += "http_request_duration_seconds_count\(Self.labels([("route", route)])) \(histogram.count)\n"
        }
        for name in counters.keys.sorted() {
            let counter = counters[name]!
            out += "# HELP \(name) \(counter.help)\n# TYPE \(name) counter\n"
            for values in counter.counts.keys.sorted(by: { $0.lexicographicallyPrecedes($1) }) {
                out += "\(name)\(Self.labels(Array(zip(counter.labelNames, values)))) \(counter.counts[values]!)\n"
            }
        }
        var described: Set<String> = []
        for metric in sampled.sorted(by: { $0.name < $1.name }) {
            if described.insert(metric.name).inserted {
                out += "# HELP \(metric.name) \(metric.help)\n# TYPE \(metric.name) \(metric.type)\n"
            }
            out += "\(metric.name)\(Self.labels(metric.labels.sorted { $0.key < $1.key }.map { ($0.key, $0.value) })) \(Self.number(metric.read()))\n"
        }
        return out
    }

    private static func labels(_ pairs: [(String, String)]) -> String {
        guard !pairs.isEmpty else { return "" }
        return "{" + pairs.map { "\($0.0)=\"\(escape($0.1))\"" }.joined(separator: ",") + "}"
    }

    private static func escape(_ value: String) -> String {
        var out = ""
        for character in value {
            switch character {
            case "\\": out += "\\\\"
            case "\"": out += "\\\""
            case "\n": out += "\\n"
            default: out.append(character)
            }
        }
        return out
    }

    static func number(_ value: Double) -> String {
        if value.isNaN { return "NaN" }
        if value.isInfinite { return value > 0 ? "+Inf" : "-Inf" }
        if value == value.rounded(), abs(value) < 1e15 { return String(Int(value)) }
        return "\(value)"
    }
}
