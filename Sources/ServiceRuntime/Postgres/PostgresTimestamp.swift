import Timestamps
import Foundation

/// Converts between `Date` and PostgreSQL's timestamp text, with plain calendar arithmetic (proleptic
/// Gregorian, UTC) rather than locale-dependent formatters.
public enum PostgresTimestamp {
    /// RFC 3339 in UTC with milliseconds, e.g. `2026-11-22T01:20:00.123Z`; years before 1 get ` BC`.
    public static func format(_ date: Date) -> String {
        let millis = Int64((date.timeIntervalSince1970 * 1000).rounded(.down))
        let (days, msOfDay) = floorDivide(millis, 86_400_000)
        let civil = CivilCalendar.civil(fromDays: days)
        let (year, month, day) = (Int64(civil.year), Int64(civil.month), Int64(civil.day))
        let hour = msOfDay / 3_600_000, minute = msOfDay / 60_000 % 60, second = msOfDay / 1000 % 60, ms = msOfDay % 1000
        let era = year < 1 ? " BC" : ""
        return "\(pad(year < 1 ? 1 - year : year, 4))-\(pad(month, 2))-\(pad(day, 2))T"
            + "\(pad(hour, 2)):\(pad(minute, 2)):\(pad(second, 2)).\(pad(ms, 3))Z\(era)"
    }

    /// Parses the server's ISO output for `timestamptz`, `timestamp` and `date`
    /// (`2026-11-22 01:20:00.123+00`, `… +05:30`, `… -03:00:00`, `… BC`, `infinity`) as well as RFC 3339
    /// (`2026-11-22T01:20:00Z`). A timestamp without zone is taken as UTC. `nil` when the text is none of these.
    public static func parse(_ text: String) -> Date? {
        switch text {
        case "infinity": return .distantFuture
        case "-infinity": return .distantPast
        default: break
        }
        var scanner = Scanner(Array(text.utf8))
        let bc = scanner.dropSuffix(" BC")
        guard let year = scanner.number(minDigits: 1, maxDigits: 9), scanner.take("-"),
              let month = scanner.number(minDigits: 2, maxDigits: 2), scanner.take("-"),
              let day = scanner.number(minDigits: 2, maxDigits: 2),
              (1...12).contains(month), (1...31).contains(day)
        else { return nil }
        var seconds: Int64 = 0
        var fraction = 0.0
        var offset: Int64 = 0
        if !scanner.atEnd {
            guard scanner.take(" ") || scanner.take("T") || scanner.take("t"),
                  let hour = scanner.number(minDigits: 2, maxDigits: 2), scanner.take(":"),
                  let minute = scanner.number(minDigits: 2, maxDigits: 2), scanner.take(":"),
                  let second = scanner.number(minDigits: 2, maxDigits: 2),
                  hour <= 24, minute < 60, second <= 60
            else { return nil }
            seconds = hour * 3600 + minute * 60 + second
            if scanner.take(".") {
                guard let digits = scanner.digits(), !digits.isEmpty else { return nil }
                fraction = Double("0." + String(decoding: digits, as: UTF8.self)) ?? 0
            }
            if scanner.take("Z") || scanner.take("z") {
                offset = 0
            } else if let sign: Int64 = scanner.take("+") ? 1 : scanner.take("-") ? -1 : nil {
                guard let zoneHours = scanner.number(minDigits: 2, maxDigits: 2) else { return nil }
                var zone = zoneHours * 3600
                _ = scanner.take(":")
                if let zoneMinutes = scanner.number(minDigits: 2, maxDigits: 2) {
                    zone += zoneMinutes * 60
                    if scanner.take(":") {
                        guard let zoneSeconds = scanner.number(minDigits: 2, maxDigits: 2) else { return nil }
                        zone += zoneSeconds
                    }
                }
                offset = sign * zone
            }
        }
        guard scanner.atEnd else { return nil }
        let days = CivilCalendar.days(year: Int(bc ? 1 - year : year), month: Int(month), day: Int(day))
        let epochSeconds = days * 86_400 + seconds - offset
        return Date(timeIntervalSince1970: Double(epochSeconds) + fraction)
    }

    private static func floorDivide(_ a: Int64, _ b: Int64) -> (Int64, Int64) {
        let remainder = a % b
        return remainder < 0 ? (a / b - 1, remainder + b) : (a / b, remainder)
    }

    private static func pad(_ value: Int64, _ width: Int) -> String {
        let digits = String(value)
        return digits.count >= width ? digits : String(repeating: "0", count: width - digits.count) + digits
    }

    /// A cursor over ASCII bytes.
    private struct Scanner {
        var bytes: [UInt8]
        var index = 0

        init(_ bytes: [UInt8]) { self.bytes = bytes }

        var atEnd: Bool { index == bytes.count }

        mutating func take(_ literal: Unicode.Scalar) -> Bool {
            guard index < bytes.count, bytes[index] == UInt8(ascii: literal) else { return false }
            index += 1
            return true
        }

        mutating func dropSuffix(_ suffix: String) -> Bool {
            let tail = Array(suffix.utf8)
            guard bytes.count >= tail.count, Array(bytes.suffix(tail.count)) == tail else { return false }
            bytes.removeLast(tail.count)
            return true
        }

        mutating func digits() -> ArraySlice<UInt8>? {
            let start = index
            while index < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) { index += 1 }
            return bytes[start..<index]
        }

        mutating func number(minDigits: Int, maxDigits: Int) -> Int64? {
            let start = index
            guard let run = digits(), (minDigits...maxDigits).contains(run.count) else {
                index = start
                return nil
            }
            return run.reduce(0) { $0 * 10 + Int64($1 - UInt8(ascii: "0")) }
        }
    }
}
