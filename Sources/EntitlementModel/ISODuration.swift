import Foundation

/// An ISO 8601 duration such as `P1M`, `P2W`, `P1Y2M10D` or `PT36H`: calendar years, months, weeks and days
/// and clock hours, minutes and seconds, each a whole non-negative number.
///
/// The text form is `P[nY][nM][nW][nD][T[nH][nM][nS]]` with the designators in that order, each at most once
/// and at least one of them present; fractions, signs and lower-case letters are rejected. Weeks may be
/// combined with the other designators (ISO 8601-2). Values compare by their components, so `P1W` and `P7D`
/// are different values that add the same time.
///
/// Codable as its text form.
public struct ISODuration: Sendable, Hashable, Codable, CustomStringConvertible {
    /// The largest value any component may have (enough for any subscription, small enough never to
    /// overflow the arithmetic).
    public static let maximumComponent = 999_999

    /// Calendar years (`Y`), 0...``maximumComponent``; added with the months first, clamping the day of the month.
    public let years: Int
    /// Calendar months (`M` before `T`), 0...``maximumComponent``; added with the years, clamping the day of the month.
    public let months: Int
    /// Weeks (`W`), 0...``maximumComponent``; each adds 7 calendar days.
    public let weeks: Int
    /// Calendar days (`D`), 0...``maximumComponent``; added after the years and months.
    public let days: Int
    /// Hours (`H`), 0...``maximumComponent``; added as elapsed time.
    public let hours: Int
    /// Minutes (`M` after `T`), 0...``maximumComponent``; added as elapsed time.
    public let minutes: Int
    /// Whole seconds (`S`), 0...``maximumComponent``; added as elapsed time.
    public let seconds: Int

    /// A duration from its components; each must lie in `0...maximumComponent`.
    public init(years: Int = 0, months: Int = 0, weeks: Int = 0, days: Int = 0,
                hours: Int = 0, minutes: Int = 0, seconds: Int = 0) {
        for component in [years, months, weeks, days, hours, minutes, seconds] {
            precondition((0...Self.maximumComponent).contains(component), "ISO duration component out of range")
        }
        self.years = years
        self.months = months
        self.weeks = weeks
        self.days = days
        self.hours = hours
        self.minutes = minutes
        self.seconds = seconds
    }

    /// Parses the text form, e.g. `P1M`; throws ``ISODurationError`` naming what is wrong.
    public init(parsing text: String) throws(ISODurationError) {
        let bytes = Array(text.utf8)
        func fail(_ reason: String) -> ISODurationError { ISODurationError(input: text, reason: reason) }

        guard bytes.first == UInt8(ascii: "P") else { throw fail("must start with \"P\"") }
        var components = [Int](repeating: 0, count: Self.designators.count)
        var next = 0
        var partEnd = Self.timeStart
        var componentCount = 0
        var position = 1
        while position < bytes.count {
            if bytes[position] == UInt8(ascii: "T") {
                guard partEnd == Self.timeStart else { throw fail("\"T\" appears twice") }
                guard position + 1 < bytes.count else {
                    throw fail("\"T\" must be followed by hours, minutes or seconds")
                }
                next = Self.timeStart
                partEnd = Self.designators.count
                position += 1
                continue
            }
            var value = 0
            let start = position
            while position < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[position]) {
                value = value * 10 + Int(bytes[position] - UInt8(ascii: "0"))
                guard value <= Self.maximumComponent else {
                    throw fail("a component is larger than \(Self.maximumComponent)")
                }
                position += 1
            }
            guard position > start else { throw fail("expected a number at offset \(position)") }
            guard position < bytes.count else { throw fail("the number at the end has no designator") }
            let designator = bytes[position]
            if designator == UInt8(ascii: ".") || designator == UInt8(ascii: ",") {
                throw fail("fractions are not supported")
            }
            guard let index = (next..<partEnd).first(where: { Self.designators[$0] == designator }) else {
                throw fail("unexpected \"\(Character(Unicode.Scalar(designator)))\" at offset \(position)")
            }
            components[index] = value
            next = index + 1
            componentCount += 1
            position += 1
        }
        guard componentCount > 0 else { throw fail("has no components") }
        self.init(years: components[0], months: components[1], weeks: components[2], days: components[3],
                  hours: components[4], minutes: components[5], seconds: components[6])
    }

    /// The designators in the order they must appear: the date part `YMWD`, then after `T` the time part `HMS`.
    private static let designators = Array("YMWDHMS".utf8)
    /// Where the time part starts in ``designators``.
    private static let timeStart = 4

    /// True when every component is zero.
    public var isZero: Bool {
        years == 0 && months == 0 && weeks == 0 && days == 0 && hours == 0 && minutes == 0 && seconds == 0
    }

    /// The canonical text form: the non-zero components in designator order (`P1Y2M10D`, `PT12H`), or `P0D`.
    public var description: String {
        guard !isZero else { return "P0D" }
        var text = "P"
        for (value, designator) in [(years, "Y"), (months, "M"), (weeks, "W"), (days, "D")] where value > 0 {
            text += "\(value)\(designator)"
        }
        if hours > 0 || minutes > 0 || seconds > 0 {
            text += "T"
            for (value, designator) in [(hours, "H"), (minutes, "M"), (seconds, "S")] where value > 0 {
                text += "\(value)\(designator)"
            }
        }
        return text
    }

    /// `date` moved forward by this duration on the UTC Gregorian calendar.
    ///
    /// Years and months are added first, keeping the day of the month but clamping it to the target month's
    /// length (Jan 31 + `P1M` = Feb 28, or Feb 29 in a leap year; Feb 29 + `P1Y` = Feb 28). Then weeks and days
    /// are added as calendar days, then hours, minutes and seconds as elapsed time (UTC has no DST). The time of
    /// day, including any fraction of a second, is kept.
    public func adding(to date: Date) -> Date {
        let reference = date.timeIntervalSinceReferenceDate
        let whole = reference.rounded(.down)
        let fraction = reference - whole
        let (startDays, secondOfDay) = CivilCalendar.split(Int64(whole) + CivilCalendar.unixOfReferenceDate)
        let start = CivilCalendar.civil(fromDays: startDays)

        let monthIndex = start.year * 12 + (start.month - 1) + years * 12 + months
        let year = monthIndex >= 0 ? monthIndex / 12 : (monthIndex - 11) / 12
        let month = monthIndex - year * 12 + 1
        let day = min(start.day, CivilCalendar.daysIn(month: month, year: year))

        let endDays = CivilCalendar.days(year: year, month: month, day: day) + Int64(weeks * 7 + days)
        let endUnix = endDays * 86400 + Int64(secondOfDay + hours * 3600 + minutes * 60 + seconds)
        return Date(timeIntervalSinceReferenceDate: Double(endUnix - CivilCalendar.unixOfReferenceDate) + fraction)
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        do {
            try self.init(parsing: container.decode(String.self))
        } catch let error as ISODurationError {
            throw DecodingError.dataCorruptedError(in: container, debugDescription: error.description)
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(description)
    }
}

/// Why a text is not an ISO 8601 duration.
public struct ISODurationError: Error, Hashable, CustomStringConvertible {
    /// The rejected text, cut to its first 64 characters.
    public let input: String
    /// What is wrong with it, e.g. `fractions are not supported`.
    public let reason: String

    init(input: String, reason: String) {
        self.input = input.count > 64 ? String(input.prefix(64)) + "…" : input
        self.reason = reason
    }

    public var description: String { "invalid ISO 8601 duration \"\(input)\": \(reason)" }
}
