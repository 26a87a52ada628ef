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
        var line = "ts="
        line.reserveCapacity(160)
        line += timestamp()
        line += " level="
        line += level.name
        line += " event="
        line += quote(event)
        for (key, value) in fields {
            guard let value else { continue }
            line += " "
            line += key
            line += "="
            line += quote(value.description)
        }
        line += "\n"
        lock.withLock {
            var bytes = line.utf8[...]
            while !bytes.isEmpty {
                let written = bytes.withContiguousStorageIfAvailable { Glibc.write(2, $0.baseAddress, $0.count) } ?? {
                    let copy = Array(bytes)
                    return copy.withUnsafeBytes { Glibc.write(2, $0.baseAddress, $0.count) }
                }()
                if written < 0 { if errno == EINTR { continue } else { return } }
                bytes = bytes.dropFirst(written)
            }
        }
    }

    nonisolated(unsafe) private static var cachedSecond: Int = -1
    nonisolated(unsafe) private static var cachedPrefix = ""

    /// `2026-11-22T01:20:00.123Z`; the part up to the second is formatted once per second.
    private static func timestamp() -> String {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        let millis = Int(now.tv_nsec / 1_000_000)
        let prefix: String = lock.withLock {
            if cachedSecond != now.tv_sec {
                var parts = tm()
                var seconds = now.tv_sec
                gmtime_r(&seconds, &parts)
                cachedPrefix = "\(pad(Int(parts.tm_year) + 1900, 4))-\(pad(Int(parts.tm_mon) + 1, 2))-\(pad(Int(parts.tm_mday), 2))T"
                    + "\(pad(Int(parts.tm_hour), 2)):\(pad(Int(parts.tm_min), 2)):\(pad(Int(parts.tm_sec), 2))."
                cachedSecond = now.tv_sec
            }
            return cachedPrefix
        }
        return prefix + pad(millis, 3) + "Z"
    }

    private static func pad(_ value: Int, _ width: Int) -> String {
        let text = String(value)
        return text.count >= width ? text : String(repeating: "0", count: width - text.count) + text
    }

    /// Quotes a value when needed and escapes anything that could break the one-line format.
    static func quote(_ value: String) -> String {
        let needsQuotes = value.isEmpty || value.utf8.contains { $0 <= 0x20 || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "=") || $0 == 0x7f }
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
