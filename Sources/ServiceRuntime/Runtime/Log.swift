import Foundation

/// Structured logging: one line per event, `key=value` pairs, written to standard error.
///
/// Values are quoted when they hold spaces, quotes or `=`; control characters are escaped so a client can
/// never forge a line. Secrets must never be passed in: callers log key ids, never keys.
///
/// Lines at `info` and below logged on the loop thread wait in a buffer that the loop writes out once per
/// iteration, before it waits for I/O again (one `write(2)` for a burst of requests instead of one each);
/// warnings and errors, lines from other threads and a full buffer are written at once, after whatever
/// waits, so the order of lines is kept. The buffer is also written at exit.
public enum Log {
    /// Severity of an event; lines below `minimum` are dropped.
    public enum Level: Int, Sendable, Comparable {
        case debug, info, warning, error
        public static func < (a: Level, b: Level) -> Bool { a.rawValue < b.rawValue }
        var name: String { ["debug", "info", "warn", "error"][rawValue] }
    }

    /// The lowest level written: `LOG_LEVEL` (`debug`, `info`, `warn`, `error`), read once; anything else is `info`.
    public static let minimum: Level = {
        switch ProcessInfo.processInfo.environment["LOG_LEVEL"]?.lowercased() {
        case "debug": .debug
        case "warn", "warning": .warning
        case "error": .error
        default: .info
        }
    }()

    /// The id of the request the current task works for: the HTTP server binds it around every handler that
    /// suspends, and the tasks a handler starts inherit it. Every line logged meanwhile carries it as
    /// `request_id` (unless the line names one itself), so a handler's lines join its access-log line.
    @TaskLocal public static var requestID: String?

    /// Logs `event` at `debug` with `fields` (nil values left out); dropped unless `LOG_LEVEL` is `debug`.
    public static func debug(_ event: String, _ fields: KeyValuePairs<String, CustomStringConvertible?> = [:]) { write(.debug, event, fields) }
    /// Logs `event` at `info` with `fields` (nil values left out); buffered when logged on the loop thread.
    public static func info(_ event: String, _ fields: KeyValuePairs<String, CustomStringConvertible?> = [:]) { write(.info, event, fields) }
    /// Logs `event` at `warn` with `fields` (nil values left out); written at once, never buffered.
    public static func warning(_ event: String, _ fields: KeyValuePairs<String, CustomStringConvertible?> = [:]) { write(.warning, event, fields) }
    /// Logs `event` at `error` with `fields` (nil values left out); written at once, never buffered.
    public static func error(_ event: String, _ fields: KeyValuePairs<String, CustomStringConvertible?> = [:]) { write(.error, event, fields) }

    private static func write(_ level: Level, _ event: String, _ fields: KeyValuePairs<String, CustomStringConvertible?>) {
        guard level >= minimum else { return }
        output.emit(line(level, event, fields), urgent: level >= .warning)
    }

    /// The whole line, newline included: `ts=… level=… event=… key=value…`.
    static func line(_ level: Level, _ event: String, _ fields: KeyValuePairs<String, CustomStringConvertible?>) -> [UInt8] {
        var line = Line(unfiltered: level, event)
        var namesRequest = false
        for (key, value) in fields {
            guard let value else { continue }
            namesRequest = namesRequest || key == "request_id"
            line.add(key, value.description)
        }
        if !namesRequest, let requestID { line.add("request_id", requestID) }
        return line.finished()
    }

    /// One line built field by field from typed values, for hot paths (the access log): nothing is boxed or
    /// formatted twice. `Line(.info, "event")` is nil when the level is not logged.
    public struct Line {
        private let level: Level
        private var bytes: [UInt8] = []

        /// Starts the line with `ts`, `level` and `event`; nil when `level` is below `Log.minimum`.
        public init?(_ level: Level, _ event: String) {
            guard level >= Log.minimum else { return nil }
            self.init(unfiltered: level, event)
        }

        fileprivate init(unfiltered level: Level, _ event: String) {
            self.level = level
            bytes.reserveCapacity(200)
            bytes.append(literal: "ts=")
            appendTimestamp(to: &bytes)
            bytes.append(literal: " level=")
            bytes.append(utf8: level.name)
            bytes.append(literal: " event=")
            appendQuoted(event, to: &bytes)
        }

        /// Appends ` key=value`, the value quoted and escaped when needed; `key` is written as is.
        public mutating func add(_ key: String, _ value: String) {
            appendKey(key)
            appendQuoted(value, to: &bytes)
        }

        /// Appends ` key=123`, the decimal unquoted; `key` is written as is.
        public mutating func add(_ key: String, _ value: Int) {
            appendKey(key)
            bytes.append(decimal: value)
        }

        /// `key=12.345`: a duration in milliseconds with three decimals.
        public mutating func add(_ key: String, milliseconds nanoseconds: UInt64) {
            appendKey(key)
            let micros = Int(clamping: nanoseconds / 1_000)
            bytes.append(decimal: micros / 1_000)
            bytes.append(UInt8(ascii: "."))
            appendDigits(micros % 1_000, 3, to: &bytes)
        }

        /// Writes the line out (see `Log` for when).
        public consuming func emit() {
            let urgent = level >= .warning
            output.emit(finished(), urgent: urgent)
        }

        consuming func finished() -> [UInt8] {
            bytes.append(0x0A)
            return bytes
        }

        private mutating func appendKey(_ key: String) {
            bytes.append(0x20)
            bytes.append(utf8: key)
            bytes.append(UInt8(ascii: "="))
        }
    }

    /// Writes out the lines waiting in the buffer.
    public static func flush() {
        output.flush()
    }

    /// From now on, `info` and `debug` lines logged on the calling thread wait in the buffer until `flush()`;
    /// the caller (the loop thread) promises to flush regularly. Also flushes at exit.
    static func bufferOnCurrentThread() {
        output.bufferOnCurrentThread()
        atexit { Log.flush() }
    }

    private static let output = Output()

    /// Standard error, with the buffer for the loop thread's routine lines.
    private final class Output: @unchecked Sendable {
        private let lock = NSLock()
        private var pending: [UInt8] = []
        private var bufferingThread: pthread_t?
        private static let bufferLimit = 32 << 10

        func bufferOnCurrentThread() {
            lock.withLock { bufferingThread = pthread_self() }
        }

        func emit(_ line: [UInt8], urgent: Bool) {
            lock.lock()
            defer { lock.unlock() }
            if !urgent, let thread = bufferingThread, pthread_equal(thread, pthread_self()) != 0 {
                pending.append(contentsOf: line)
                if pending.count >= Self.bufferLimit { writePending() }
                return
            }
            writePending()
            Self.writeAll(line)
        }

        func flush() {
            lock.withLock { writePending() }
        }

        private func writePending() {
            guard !pending.isEmpty else { return }
            Self.writeAll(pending)
            pending.removeAll(keepingCapacity: true)
        }

        private static func writeAll(_ bytes: [UInt8]) {
            bytes.withUnsafeBytes { raw in
                var offset = 0
                while offset < raw.count {
                    let written = Glibc.write(2, raw.baseAddress! + offset, raw.count - offset)
                    if written < 0 {
                        if errno == EINTR { continue }
                        return
                    }
                    offset += written
                }
            }
        }
    }

    nonisolated(unsafe) private static var cachedSecond: Int = -1
    nonisolated(unsafe) private static var cachedPrefix: [UInt8] = []
    private static let timestampLock = NSLock()

    /// Appends `2026-11-22T01:20:00.123Z`; the part up to the second is formatted once per second.
    private static func appendTimestamp(to line: inout [UInt8]) {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        timestampLock.withLock {
            if cachedSecond != now.tv_sec {
                var parts = tm()
                var seconds = now.tv_sec
                gmtime_r(&seconds, &parts)
                var prefix: [UInt8] = []
                appendDigits(Int(parts.tm_year) + 1900, 4, to: &prefix)
                prefix.append(UInt8(ascii: "-"))
                appendDigits(Int(parts.tm_mon) + 1, 2, to: &prefix)
                prefix.append(UInt8(ascii: "-"))
                appendDigits(Int(parts.tm_mday), 2, to: &prefix)
                prefix.append(UInt8(ascii: "T"))
                appendDigits(Int(parts.tm_hour), 2, to: &prefix)
                prefix.append(UInt8(ascii: ":"))
                appendDigits(Int(parts.tm_min), 2, to: &prefix)
                prefix.append(UInt8(ascii: ":"))
                appendDigits(Int(parts.tm_sec), 2, to: &prefix)
                prefix.append(UInt8(ascii: "."))
                cachedPrefix = prefix
                cachedSecond = now.tv_sec
            }
            line.append(contentsOf: cachedPrefix)
        }
        appendDigits(Int(now.tv_nsec / 1_000_000), 3, to: &line)
        line.append(UInt8(ascii: "Z"))
    }

    /// Appends the last `width` decimal digits of a non-negative `value`, zero-padded.
    private static func appendDigits(_ value: Int, _ width: Int, to bytes: inout [UInt8]) {
        var divisor = 1
        for _ in 1..<width { divisor *= 10 }
        while divisor > 0 {
            bytes.append(UInt8(truncatingIfNeeded: (value / divisor) % 10) + 0x30)
            divisor /= 10
        }
    }

    /// Appends `value`, quoted when needed, with anything that could break the one-line format escaped: control
    /// characters (C0, DEL, C1 with NEL among them) and Unicode's line and paragraph separators, which some log
    /// tools split lines on (a user id holding one must not forge a line).
    private static func appendQuoted(_ value: String, to line: inout [UInt8]) {
        var value = value
        let plain = value.withUTF8 { bytes in
            guard !bytes.isEmpty, !bytes.contains(where: { $0 <= 0x20 || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "=") || $0 >= 0x7f }) else {
                return false
            }
            line.append(contentsOf: bytes)
            return true
        }
        guard !plain else { return }
        line.append(UInt8(ascii: "\""))
        for scalar in value.unicodeScalars {
            switch scalar {
            case "\"": line.append(contentsOf: #"\""#.utf8)
            case "\\": line.append(contentsOf: #"\\"#.utf8)
            case "\n": line.append(contentsOf: #"\n"#.utf8)
            case "\r": line.append(contentsOf: #"\r"#.utf8)
            case "\t": line.append(contentsOf: #"\t"#.utf8)
            case _ where scalar.value < 0x20 || (0x7f...0x9f).contains(scalar.value) || scalar.value == 0x2028 || scalar.value == 0x2029:
                line.append(contentsOf: "\\u{\(String(scalar.value, radix: 16))}".utf8)
            default: line.append(contentsOf: String(scalar).utf8)
            }
        }
        line.append(UInt8(ascii: "\""))
    }
}
