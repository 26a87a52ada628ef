import Foundation

/// Structured logging: one line per event, `key=value` pairs, written to standard error.
///
/// Values are quoted when they hold spaces, quotes or `=`; control characters are escaped so a client can
/// never forge a line. Secrets must never be passed in: callers log key ids, never keys.
public enum Log {
    /// Severity of an event; lines below `minimum` are dropped.
    public enum Level: Int, Sendable, Comparable {
        case debug, info, warning, error
        public static func < (a: Level, b: Level) -> Bool { a.rawValue < b.rawValue }
        var name: String { ["debug", "info", "warn", "error"][rawValue] }
    }

    nonisolated(unsafe) private static var minimumLevel: Level = {
        switch ProcessInfo.processInfo.environment["LOG_LEVEL"]?.lowercased() {
        case "debug": .debug
        case "warn", "warning": .warning
        case "error": .error
        default: .info
        }
    }()
    private static let lock = NSLock()

    /// The lowest level written; set once at start-up.
    public static var minimum: Level {
        get { lock.withLock { minimumLevel } }
        set { lock.withLock { minimumLevel = newValue } }
    }

    public static func debug(_ event: String, _ fields: KeyValuePairs<String, CustomStringConvertible?> = [:]) { write(.debug, event, fields) }
    public static func info(_ event: String, _ fields: KeyValuePairs<String, CustomStringConvertible?> = [:]) { write(.info, event, fields) }
    public static func warning(_ event: String, _ fields: KeyValuePairs<String, CustomStringConvertible?> = [:]) { write(.warning, event, fields) }
    public static func error(_ event: String, _ fields: KeyValuePairs<String, CustomStringConvertible?> = [:]) { write(.error, event, fields) }

    private static func write(_ level: Level, _ event: String, _ fields: KeyValuePairs<String, CustomStringConvertible?>) {
        guard level >= minimum else { return }
        var line = "ts=\(timestamp()) level=\(level.name) event=\(quote(event))"
        for (key, value) in fields {
            guard let value else { continue }
            line += " \(key)=\(quote(value.description))"
        }
        line += "\n"
        lock.withLock { FileHandle.standardError.write(Data(line.utf8)) }
    }

    private static func timestamp() -> String {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        var parts = tm()
        var seconds = now.tv_sec
        gmtime_r(&seconds, &parts)
        let millis = now.tv_nsec / 1_000_000
        func pad(_ v: Int32, _ width: Int) -> String {
            let s = String(v)
            return String(repeating: "0", count: max(0, width - s.count)) + s
        }
        return "\(pad(parts.tm_year + 1900, 4))-\(pad(parts.tm_mon + 1, 2))-\(pad(parts.tm_mday, 2))T"
            + "\(pad(parts.tm_hour, 2)):\(pad(parts.tm_min, 2)):\(pad(parts.tm_sec, 2)).\(pad(Int32(millis), 3))Z"
    }

    /// Quotes a value when needed and escapes anything that could break the one-line format.
    static func quote(_ value: String) -> String {
        let needsQuotes = value.isEmpty || value.contains { $0 == " " || $0 == "\"" || $0 == "=" || $0.asciiValue.map { $0 < 0x20 || $0 == 0x7f } ?? false }
        guard needsQuotes else { return value }
        var out = "\""
        for scalar in value.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where scalar.value < 0x20 || scalar.value == 0x7f: out += "\\u{\(String(scalar.value, radix: 16))}"
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }
}
