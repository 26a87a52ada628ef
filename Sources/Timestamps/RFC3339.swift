import Foundation

/// RFC 3339 date-times, formatted and parsed by hand on integer arithmetic: no `DateFormatter`, no shared
/// state, safe to call from any thread.
///
/// Formatting always writes UTC with whole seconds (`2026-11-22T01:20:00Z`). Fractional seconds are
/// truncated towards the past (floor), never rounded: an instant is shown as the second it falls in, so a
/// formatted expiry is never later than the real one. Instants outside years 0000–9999 cannot be written
/// in RFC 3339 and are clamped to the nearest one that can (a NaN interval is written as the Unix epoch).
///
/// Parsing accepts the full RFC 3339 `date-time` grammar: `T` or `t` between date and time, `Z`, `z` or a
/// `±hh:mm` offset, any number of fractional-second digits (nanosecond precision is kept, further digits are
/// ignored) and a leap second `60`, which is read as the first second of the next minute.
public enum RFC3339 {
    /// The RFC 3339 UTC form of `date`, whole seconds (fractions truncated).
    public static func string(from date: Date) -> String {
        let reference = date.timeIntervalSinceReferenceDate
        let bounded = reference.isNaN
            ? -Double(CivilCalendar.unixOfReferenceDate)
            : min(max(reference.rounded(.down), Double(minimumReference)), Double(maximumReference))
        let unix = Int64(bounded) + CivilCalendar.unixOfReferenceDate
        let (days, secondOfDay) = CivilCalendar.split(unix)
        let civil = CivilCalendar.civil(fromDays: days)

        var bytes = [UInt8]()
        bytes.reserveCapacity(20)
        append(civil.year, width: 4, to: &bytes)
        bytes.append(UInt8(ascii: "-"))
        append(civil.month, width: 2, to: &bytes)
        bytes.append(UInt8(ascii: "-"))
        append(civil.day, width: 2, to: &bytes)
        bytes.append(UInt8(ascii: "T"))
        append(secondOfDay / 3600, width: 2, to: &bytes)
        bytes.append(UInt8(ascii: ":"))
        append(secondOfDay / 60 % 60, width: 2, to: &bytes)
        bytes.append(UInt8(ascii: ":"))
        append(secondOfDay % 60, width: 2, to: &bytes)
        bytes.append(UInt8(ascii: "Z"))
        return String(decoding: bytes, as: UTF8.self)
    }

    /// The instant an RFC 3339 `date-time` names, or nil when `text` is not one (wrong shape, a field out of
    /// range such as month 13 or February 30, trailing characters).
    public static func date(from text: some StringProtocol) -> Date? {
        var scanner = Scanner(text: Array(text.utf8))
        guard let year = scanner.digits(4), scanner.skip("-"),
              let month = scanner.digits(2), scanner.skip("-"),
              let day = scanner.digits(2), scanner.skip("T") || scanner.skip("t"),
              let hour = scanner.digits(2), scanner.skip(":"),
              let minute = scanner.digits(2), scanner.skip(":"),
              let second = scanner.digits(2)
        else { return nil }
        guard (1...12).contains(month), (1...CivilCalendar.daysIn(month: month, year: year)).contains(day),
              hour < 24, minute < 60, second <= 60
        else { return nil }

        var nanoseconds: Int64 = 0
        if scanner.skip(".") {
            guard let fraction = scanner.fraction() else { return nil }
            nanoseconds = fraction
        }

        let offsetSeconds: Int64
        if scanner.skip("Z") || scanner.skip("z") {
            offsetSeconds = 0
        } else if let sign = scanner.sign(), let offsetHours = scanner.digits(2), scanner.skip(":"),
                  let offsetMinutes = scanner.digits(2), offsetHours < 24, offsetMinutes < 60 {
            offsetSeconds = sign * Int64(offsetHours * 3600 + offsetMinutes * 60)
        } else {
            return nil
        }
        guard scanner.atEnd else { return nil }

        let days = CivilCalendar.days(year: year, month: month, day: day)
        let unix = days * 86400 + Int64(hour * 3600 + minute * 60 + second) - offsetSeconds
        let reference = unix - CivilCalendar.unixOfReferenceDate
        return Date(timeIntervalSinceReferenceDate: Double(reference) + Double(nanoseconds) / 1e9)
    }

    /// 0000-01-01T00:00:00Z and 9999-12-31T23:59:59Z, in seconds since the reference date.
    private static let minimumReference = CivilCalendar.days(year: 0, month: 1, day: 1) * 86400
        - CivilCalendar.unixOfReferenceDate
    private static let maximumReference = CivilCalendar.days(year: 9999, month: 12, day: 31) * 86400 + 86399
        - CivilCalendar.unixOfReferenceDate

    private static func append(_ value: Int, width: Int, to bytes: inout [UInt8]) {
        var divisor = 1
        for _ in 1..<width { divisor *= 10 }
        var rest = value
        while divisor > 0 {
            bytes.append(UInt8(ascii: "0") + UInt8(rest / divisor))
            rest %= divisor
            divisor /= 10
        }
    }

    /// A cursor over the UTF-8 bytes of the text being parsed.
    private struct Scanner {
        let text: [UInt8]
        var position = 0

        var atEnd: Bool { position == text.count }

        mutating func skip(_ character: Unicode.Scalar) -> Bool {
            guard position < text.count, text[position] == UInt8(ascii: character) else { return false }
            position += 1
            return true
        }

        /// Exactly `count` ASCII digits as a number.
        mutating func digits(_ count: Int) -> Int? {
            guard position + count <= text.count else { return nil }
            var value = 0
            for byte in text[position..<position + count] {
                guard let digit = Self.digit(byte) else { return nil }
                value = value * 10 + digit
            }
            position += count
            return value
        }

        /// One or more digits after the decimal point, as nanoseconds (digits past the ninth are ignored).
        mutating func fraction() -> Int64? {
            var value: Int64 = 0
            var count = 0
            while position < text.count, let digit = Self.digit(text[position]) {
                if count < 9 { value = value * 10 + Int64(digit) }
                count += 1
                position += 1
            }
            guard count > 0 else { return nil }
            for _ in count..<max(count, 9) { value *= 10 }
            return value
        }

        /// `+1` or `-1` for an offset sign.
        mutating func sign() -> Int64? {
            if skip("+") { return 1 }
            if skip("-") { return -1 }
            return nil
        }

        private static func digit(_ byte: UInt8) -> Int? {
            (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) ? Int(byte - UInt8(ascii: "0")) : nil
        }
    }
}

extension JSONEncoder.DateEncodingStrategy {
    /// Dates as RFC 3339 UTC strings with whole seconds (see ``RFC3339``).
    public static var rfc3339: Self {
        .custom { date, encoder in
            var container = encoder.singleValueContainer()
            try container.encode(RFC3339.string(from: date))
        }
    }
}

extension JSONDecoder.DateDecodingStrategy {
    /// Dates from RFC 3339 strings (see ``RFC3339``); anything else is a `dataCorrupted` error.
    public static var rfc3339: Self {
        .custom { decoder in
            let container = try decoder.singleValueContainer()
            let text = try container.decode(String.self)
            guard let date = RFC3339.date(from: text) else {
                throw DecodingError.dataCorruptedError(
                    in: container, debugDescription: "must be an RFC 3339 date-time such as 2026-11-22T01:20:00Z")
            }
            return date
        }
    }
}

/// Proleptic Gregorian calendar arithmetic in UTC on plain integers (Howard Hinnant's `days_from_civil` and
/// `civil_from_days`), shared by ``RFC3339``, ``ISODuration`` and the runtime's timestamp codecs. Days count
/// from 1970-01-01.
public enum CivilCalendar {
    /// Seconds from 1970-01-01 to Foundation's reference date 2001-01-01.
    public static let unixOfReferenceDate: Int64 = 978_307_200

    /// The day number of a civil date (month 1–12; `day` may run past the month's end, it simply counts on).
    public static func days(year: Int, month: Int, day: Int) -> Int64 {
        let y = Int64(month <= 2 ? year - 1 : year)
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let shiftedMonth = Int64(month > 2 ? month - 3 : month + 9)
        let dayOfYear = (153 * shiftedMonth + 2) / 5 + Int64(day) - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    /// The civil date of a day number.
    public static func civil(fromDays days: Int64) -> (year: Int, month: Int, day: Int) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let shiftedMonth = (5 * dayOfYear + 2) / 153
        let day = Int(dayOfYear - (153 * shiftedMonth + 2) / 5 + 1)
        let month = Int(shiftedMonth < 10 ? shiftedMonth + 3 : shiftedMonth - 9)
        let year = Int(yearOfEra + era * 400) + (month <= 2 ? 1 : 0)
        return (year, month, day)
    }

    /// Whole Unix seconds as a day number and the second within that day (0–86399), also before 1970.
    public static func split(_ unix: Int64) -> (days: Int64, secondOfDay: Int) {
        let days = unix >= 0 ? unix / 86400 : (unix - 86399) / 86400
        return (days, Int(unix - days * 86400))
    }

    /// The number of days in `month` of `year`.
    public static func daysIn(month: Int, year: Int) -> Int {
        switch month {
        case 2: isLeap(year) ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }

    /// True for a Gregorian leap year.
    public static func isLeap(_ year: Int) -> Bool {
        year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
    }
}
