import Foundation

/// RFC 3339 date-times, formatted and parsed by hand on integer arithmetic: no `DateFormatter`, no shared
/// state, safe to call from any thread. One codec, two dialects (``Dialect``): the API's strict RFC 3339 and
/// PostgreSQL's timestamp text, which the database client binds and reads.
///
/// Strict formatting always writes UTC with whole seconds (`2026-11-22T01:20:00Z`). Fractional seconds are
/// truncated towards the past (floor), never rounded: an instant is shown as the second it falls in, so a
/// formatted expiry is never later than the real one. Instants outside years 0000–9999 cannot be written
/// in RFC 3339 and are clamped to the nearest one that can (a NaN interval is written as the Unix epoch).
///
/// Strict parsing accepts the full RFC 3339 `date-time` grammar: `T` or `t` between date and time, `Z`, `z`
/// or a `±hh:mm` offset, any number of fractional-second digits (nanosecond precision is kept, further digits
/// are ignored) and a leap second `60`, which is read as the first second of the next minute.
public enum RFC3339 {
    /// Which text form is written and read.
    public enum Dialect: Sendable {
        /// RFC 3339 as the API speaks it (see ``RFC3339``).
        case strict
        /// PostgreSQL's timestamp text. Written as RFC 3339 in UTC with milliseconds (truncated), years before 1
        /// as their era (`0044-03-15T12:00:00.000Z BC`), instants past the server's range as `infinity` or
        /// `-infinity`. Read as the server writes `timestamptz`, `timestamp` and `date` in its ISO style
        /// (`2026-11-22 01:20:00.123+00`, offsets `+05:30` or `-03:00:00`, none for UTC, a date alone, ` BC`,
        /// `infinity` and `-infinity` as `Date.distantFuture` and `.distantPast`) as well as strict RFC 3339.
        case postgreSQL
    }

    /// The RFC 3339 UTC form of `date`, whole seconds (fractions truncated).
    public static func string(from date: Date) -> String { string(from: date, dialect: .strict) }

    /// The instant an RFC 3339 `date-time` names, or nil when `text` is not one (wrong shape, a field out of
    /// range such as month 13 or February 30, trailing characters).
    public static func date(from text: some StringProtocol) -> Date? { date(from: text, dialect: .strict) }

    /// `date` in `dialect`'s form.
    public static func string(from date: Date, dialect: Dialect) -> String {
        var bytes = [UInt8]()
        bytes.reserveCapacity(dialect == .strict ? 20 : 27)
        append(date, dialect: dialect, to: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Appends `date`'s strict RFC 3339 form (``string(from:)``) to `bytes`, with no `String` in between.
    public static func append(_ date: Date, to bytes: inout [UInt8]) { append(date, dialect: .strict, to: &bytes) }

    /// Appends `date` in `dialect`'s form to `bytes`.
    public static func append(_ date: Date, dialect: Dialect, to bytes: inout [UInt8]) {
        let reference = date.timeIntervalSinceReferenceDate
        var millisecond: Int?
        let bounded: Double
        switch dialect {
        case .strict:
            bounded = reference.isNaN
                ? -Double(CivilCalendar.unixOfReferenceDate)
                : min(max(reference.rounded(.down), Double(minimumReference)), Double(maximumReference))
        case .postgreSQL:
            if reference >= postgresLimit { return bytes.append(contentsOf: "infinity".utf8) }
            if reference <= -postgresLimit { return bytes.append(contentsOf: "-infinity".utf8) }
            // Milliseconds, truncated; but a `Date` made from Apple's milliseconds is not exact in binary (it may
            // fall a few ten-thousandths of a millisecond short), so within a microsecond below a millisecond
            // counts as that millisecond: plain truncation stored about a quarter of Apple's dates 1 ms early.
            let milliseconds = reference.isNaN
                ? -Double(CivilCalendar.unixOfReferenceDate) * 1000 : (reference * 1000 + 0.001).rounded(.down)
            let (seconds, remainder) = floorDivision(Int64(milliseconds), 1000)
            bounded = Double(seconds)
            millisecond = Int(remainder)
        }
        let unix = Int64(bounded) + CivilCalendar.unixOfReferenceDate
        let (days, secondOfDay) = CivilCalendar.split(unix)
        let civil = CivilCalendar.civil(fromDays: days)
        let beforeChrist = millisecond != nil && civil.year < 1

        append(beforeChrist ? 1 - civil.year : civil.year, width: 4, to: &bytes)
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
        if let millisecond {
            bytes.append(UInt8(ascii: "."))
            append(millisecond, width: 3, to: &bytes)
        }
        bytes.append(UInt8(ascii: "Z"))
        if beforeChrist { bytes.append(contentsOf: " BC".utf8) }
    }

    /// The instant `text` names in `dialect`, or nil when it names none.
    public static func date(from text: some StringProtocol, dialect: Dialect) -> Date? {
        if let parsed = text.utf8.withContiguousStorageIfAvailable({ parse($0, dialect) }) { return parsed }
        return Array(text.utf8).withUnsafeBufferPointer { parse($0, dialect) }
    }

    /// The instant the UTF-8 text `utf8` names in `dialect`, or nil when it names none: ``date(from:dialect:)``
    /// on bytes, for text read straight from a buffer without a `String` in between.
    public static func date(utf8 text: UnsafeBufferPointer<UInt8>, dialect: Dialect) -> Date? { parse(text, dialect) }

    private static func parse(_ text: UnsafeBufferPointer<UInt8>, _ dialect: Dialect) -> Date? {
        var scanner = Scanner(text: text)
        let lenient = dialect == .postgreSQL
        var beforeChrist = false
        if lenient {
            if scanner.equals("infinity") { return .distantFuture }
            if scanner.equals("-infinity") { return .distantPast }
            beforeChrist = scanner.dropSuffix(" BC")
        }
        guard let digits = lenient ? scanner.number(upTo: 9) : scanner.digits(4), scanner.skip("-"),
              let month = scanner.digits(2), scanner.skip("-"),
              let day = scanner.digits(2)
        else { return nil }
        let year = beforeChrist ? 1 - digits : digits
        guard (1...12).contains(month), (1...CivilCalendar.daysIn(month: month, year: year)).contains(day) else { return nil }
        let days = CivilCalendar.days(year: year, month: month, day: day)
        if lenient && scanner.atEnd { return date(unix: days * 86400, nanoseconds: 0) }

        guard scanner.skip("T") || scanner.skip("t") || (lenient && scanner.skip(" ")),
              let hour = scanner.digits(2), scanner.skip(":"),
              let minute = scanner.digits(2), scanner.skip(":"),
              let second = scanner.digits(2),
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
        } else if let sign = scanner.sign() {
            guard let offsetHours = scanner.digits(2), offsetHours < 24 else { return nil }
            var offset = offsetHours * 3600
            if lenient {
                // The server writes `+05`, `+05:30` or `-03:00:00` (local mean time has seconds).
                if scanner.skip(":") {
                    guard let offsetMinutes = scanner.digits(2), offsetMinutes < 60 else { return nil }
                    offset += offsetMinutes * 60
                    if scanner.skip(":") {
                        guard let zoneSeconds = scanner.digits(2), zoneSeconds < 60 else { return nil }
                        offset += zoneSeconds
                    }
                }
            } else {
                guard scanner.skip(":"), let offsetMinutes = scanner.digits(2), offsetMinutes < 60 else { return nil }
                offset += offsetMinutes * 60
            }
            offsetSeconds = Int64(sign * offset)
        } else if lenient {
            offsetSeconds = 0  // a `timestamp` without zone is read as UTC
        } else {
            return nil
        }
        guard scanner.atEnd else { return nil }
        return date(unix: days * 86400 + Int64(hour * 3600 + minute * 60 + second) - offsetSeconds, nanoseconds: nanoseconds)
    }

    private static func date(unix: Int64, nanoseconds: Int64) -> Date {
        Date(timeIntervalSinceReferenceDate: Double(unix - CivilCalendar.unixOfReferenceDate) + Double(nanoseconds) / 1e9)
    }

    /// 0000-01-01T00:00:00Z and 9999-12-31T23:59:59Z, in seconds since the reference date.
    private static let minimumReference = CivilCalendar.days(year: 0, month: 1, day: 1) * 86400
        - CivilCalendar.unixOfReferenceDate
    private static let maximumReference = CivilCalendar.days(year: 9999, month: 12, day: 31) * 86400 + 86399
        - CivilCalendar.unixOfReferenceDate
    /// Past this many seconds from the reference date either way PostgreSQL holds no timestamp (its range is
    /// 4713 BC to AD 294276): written as `infinity` or `-infinity`.
    private static let postgresLimit = 9.2e12

    private static func floorDivision(_ a: Int64, _ b: Int64) -> (quotient: Int64, remainder: Int64) {
        let remainder = a % b
        return remainder < 0 ? (a / b - 1, remainder + b) : (a / b, remainder)
    }

    /// `value` in decimal, zero-padded to at least `width` digits.
    private static func append(_ value: Int, width: Int, to bytes: inout [UInt8]) {
        var divisor = 1
        var digits = 1
        while digits < width || value / divisor >= 10 {
            divisor *= 10
            digits += 1
        }
        var rest = value
        while divisor > 0 {
            bytes.append(UInt8(ascii: "0") + UInt8(rest / divisor))
            rest %= divisor
            divisor /= 10
        }
    }

    /// A cursor over the UTF-8 bytes of the text being parsed.
    private struct Scanner {
        var text: UnsafeBufferPointer<UInt8>
        var position = 0

        var atEnd: Bool { position == text.count }

        mutating func skip(_ character: Unicode.Scalar) -> Bool {
            guard position < text.count, text[position] == UInt8(ascii: character) else { return false }
            position += 1
            return true
        }

        /// True when the whole text is `literal`.
        func equals(_ literal: StaticString) -> Bool {
            literal.utf8CodeUnitCount == text.count
                && literal.withUTF8Buffer { $0.elementsEqual(text) }
        }

        /// Ends the text before `suffix` when it ends with it.
        mutating func dropSuffix(_ suffix: StaticString) -> Bool {
            let count = suffix.utf8CodeUnitCount
            guard text.count >= count,
                  suffix.withUTF8Buffer({ $0.elementsEqual(text[(text.count - count)...]) })
            else { return false }
            text = UnsafeBufferPointer(rebasing: text[..<(text.count - count)])
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

        /// One to `limit` ASCII digits as a number.
        mutating func number(upTo limit: Int) -> Int? {
            var value = 0
            var count = 0
            while position < text.count, let digit = Self.digit(text[position]) {
                guard count < limit else { return nil }
                value = value * 10 + digit
                count += 1
                position += 1
            }
            return count > 0 ? value : nil
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
        mutating func sign() -> Int? {
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
/// `civil_from_days`), shared by ``RFC3339`` and ``ISODuration``. Days count
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
