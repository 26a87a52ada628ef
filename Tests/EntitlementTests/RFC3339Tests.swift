import Foundation
import Testing
@testable import EntitlementModel

@Suite struct RFC3339Tests {
    @Test func formatsUTCWithWholeSeconds() {
        #expect(RFC3339.string(from: Date(timeIntervalSince1970: 0)) == "1970-01-01T00:00:00Z")
        #expect(RFC3339.string(from: Date(timeIntervalSince1970: 1_795_305_600)) == "2026-11-22T00:00:00Z")
        #expect(RFC3339.string(from: Date(timeIntervalSince1970: 1_795_310_400)) == "2026-11-22T01:20:00Z")
        #expect(RFC3339.string(from: Date(timeIntervalSince1970: 951_782_400)) == "2000-02-29T00:00:00Z")
        #expect(RFC3339.string(from: Date(timeIntervalSince1970: -1)) == "1969-12-31T23:59:59Z")
    }

    @Test func truncatesFractionalSecondsTowardsThePast() {
        #expect(RFC3339.string(from: Date(timeIntervalSince1970: 1_795_310_400.999)) == "2026-11-22T01:20:00Z")
        #expect(RFC3339.string(from: Date(timeIntervalSince1970: 1_795_310_399.5)) == "2026-11-22T01:19:59Z")
        #expect(RFC3339.string(from: Date(timeIntervalSince1970: -0.25)) == "1969-12-31T23:59:59Z")
    }

    @Test func clampsInstantsOutsideFourDigitYears() {
        #expect(RFC3339.string(from: Date(timeIntervalSince1970: 1e15)) == "9999-12-31T23:59:59Z")
        #expect(RFC3339.string(from: Date(timeIntervalSince1970: -1e15)) == "0000-01-01T00:00:00Z")
        #expect(RFC3339.string(from: Date(timeIntervalSinceReferenceDate: .nan)) == "1970-01-01T00:00:00Z")
        #expect(RFC3339.string(from: .distantFuture) == "4001-01-01T00:00:00Z")
    }

    @Test func agreesWithFoundationAcrossTheCalendar() {
        let style = Date.ISO8601FormatStyle()
        // Steps of a little over 19 days with a changing time of day, from 1601 to about 2400.
        var seconds: Int64 = -11_644_473_600
        while seconds < 13_000_000_000 {
            let date = Date(timeIntervalSince1970: TimeInterval(seconds))
            let text = RFC3339.string(from: date)
            #expect(text == style.format(date))
            #expect(RFC3339.date(from: text) == date)
            seconds += 1_654_321
        }
    }

    @Test func parsesZuluAndOffsets() {
        let instant = Date(timeIntervalSince1970: 1_795_310_400)
        #expect(RFC3339.date(from: "2026-11-22T01:20:00Z") == instant)
        #expect(RFC3339.date(from: "2026-11-22t01:20:00z") == instant)
        #expect(RFC3339.date(from: "2026-11-22T06:50:00+05:30") == instant)
        #expect(RFC3339.date(from: "2026-11-21T17:20:00-08:00") == instant)
        #expect(RFC3339.date(from: "2026-11-22T01:20:00-00:00") == instant)
        #expect(RFC3339.date(from: "2026-11-22T01:20:00+00:00"[...]) == instant)
    }

    @Test func parsesFractionalSeconds() throws {
        let base = 1_795_310_400.0
        #expect(RFC3339.date(from: "2026-11-22T01:20:00.5Z") == Date(timeIntervalSince1970: base + 0.5))
        let millis = try #require(RFC3339.date(from: "2026-11-22T01:20:00.123Z"))
        #expect(abs(millis.timeIntervalSince1970 - (base + 0.123)) < 1e-6)
        let nanos = try #require(RFC3339.date(from: "2026-11-22T01:20:00.123456789123+01:00"))
        #expect(abs(nanos.timeIntervalSince1970 - (base - 3600 + 0.123456789)) < 1e-6)
        #expect(RFC3339.string(from: millis) == "2026-11-22T01:20:00Z")
    }

    @Test func readsALeapSecondAsTheNextMinute() {
        #expect(RFC3339.date(from: "2016-12-31T23:59:60Z") == RFC3339.date(from: "2017-01-01T00:00:00Z"))
    }

    @Test(arguments: [
        "", "2026-11-22", "2026-11-22T01:20Z", "2026-11-22T01:20:00", "2026-11-22 01:20:00Z",
        "2026-13-01T00:00:00Z", "2026-00-01T00:00:00Z", "2026-02-29T00:00:00Z", "2026-04-31T00:00:00Z",
        "2026-11-22T24:00:00Z", "2026-11-22T01:60:00Z", "2026-11-22T01:20:61Z", "2026-11-22T01:20:00.Z",
        "2026-11-22T01:20:00+0100", "2026-11-22T01:20:00+24:00", "2026-11-22T01:20:00+01:60",
        "2026-11-22T01:20:00Zjunk", " 2026-11-22T01:20:00Z", "26-11-22T01:20:00Z", "2026-11-2xT01:20:00Z",
        "２０２６-11-22T01:20:00Z", "+2026-11-22T01:20:00Z",
    ])
    func rejectsWhatIsNotADateTime(text: String) {
        #expect(RFC3339.date(from: text) == nil)
    }

    @Test func acceptsFebruary29InLeapYearsOnly() {
        #expect(RFC3339.date(from: "2028-02-29T00:00:00Z") != nil)
        #expect(RFC3339.date(from: "2000-02-29T00:00:00Z") != nil)
        #expect(RFC3339.date(from: "1900-02-29T00:00:00Z") == nil)
    }

    @Test func worksFromManyTasksAtOnce() async {
        let mismatches = await withTaskGroup(of: Int.self) { group in
            for task in 0..<8 {
                group.addTask {
                    var mismatches = 0
                    for step in 0..<2_000 {
                        let date = Date(timeIntervalSince1970: TimeInterval(task * 100_000_000 + step * 48_611))
                        if RFC3339.date(from: RFC3339.string(from: date)) != date { mismatches += 1 }
                    }
                    return mismatches
                }
            }
            return await group.reduce(0, +)
        }
        #expect(mismatches == 0)
    }

    @Test func servesAsJSONDateStrategies() throws {
        struct Stamp: Codable, Equatable { var at: Date }
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .rfc3339
        let json = try encoder.encode(Stamp(at: Date(timeIntervalSince1970: 1_795_310_400.75)))
        #expect(String(decoding: json, as: UTF8.self) == #"{"at":"2026-11-22T01:20:00Z"}"#)

        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .rfc3339
        #expect(try decoder.decode(Stamp.self, from: json) == Stamp(at: Date(timeIntervalSince1970: 1_795_310_400)))
        #expect(throws: DecodingError.self) {
            try decoder.decode(Stamp.self, from: Data(#"{"at":"yesterday"}"#.utf8))
        }
    }

    @Test func thePostgreSQLDialectWritesAndReadsTheServersWholeRange() throws {
        let far = Date(timeIntervalSince1970: 1e12)
        #expect(RFC3339.string(from: far, dialect: .postgreSQL) == "33658-09-27T01:46:40.000Z")
        #expect(RFC3339.date(from: "33658-09-27 01:46:40+00", dialect: .postgreSQL) == far)
        // Foundation's distant past is 1 January AD 1 of the Julian calendar: 30 December 1 BC in the proleptic Gregorian calendar the server counts in.
        #expect(RFC3339.string(from: .distantPast, dialect: .postgreSQL) == "0001-12-30T00:00:00.000Z BC")
        #expect(RFC3339.date(from: "0001-12-30 00:00:00+00 BC", dialect: .postgreSQL) == .distantPast)
        #expect(RFC3339.string(from: Date(timeIntervalSince1970: 1e14), dialect: .postgreSQL) == "infinity")
        #expect(RFC3339.string(from: Date(timeIntervalSince1970: -1e14), dialect: .postgreSQL) == "-infinity")
        #expect(RFC3339.string(from: Date(timeIntervalSince1970: .infinity), dialect: .postgreSQL) == "infinity")
        let bc = try #require(RFC3339.date(from: "4713-11-24 00:00:00+00 BC", dialect: .postgreSQL))
        #expect(RFC3339.string(from: bc, dialect: .postgreSQL) == "4713-11-24T00:00:00.000Z BC")
        // Day and time, no zone (a `timestamp`), read as UTC; a leap year BC is astronomical year 1 - n.
        #expect(RFC3339.date(from: "2026-11-22 01:20:00.5", dialect: .postgreSQL) == Date(timeIntervalSince1970: 1_795_310_400.5))
        #expect(RFC3339.date(from: "0005-02-29 BC", dialect: .postgreSQL) != nil)
        #expect(RFC3339.date(from: "0004-02-29 BC", dialect: .postgreSQL) == nil)
        // The strict dialect keeps refusing the server's forms.
        #expect(RFC3339.date(from: "2026-11-22 01:20:00+00") == nil)
        #expect(RFC3339.date(from: "infinity") == nil)
    }

    /// Apple's dates are milliseconds since 1970; a `Date` made from one is not exact in binary, and the
    /// server's form must still name that millisecond, not the one before.
    @Test func thePostgreSQLDialectKeepsAppleMillisecondsExact() {
        var early = 0
        for step in 0..<20_000 {
            let ms = Int64(1_700_000_000_000) + Int64(step) * 7_919
            let text = RFC3339.string(from: Date(timeIntervalSince1970: Double(ms) / 1_000), dialect: .postgreSQL)
            if !text.hasSuffix(String(format: ".%03dZ", Int(ms % 1_000))) { early += 1 }
        }
        #expect(early == 0)
    }

    @Test func civilCalendarRoundTripsDayNumbers() {
        for days in stride(from: Int64(-800_000), through: 3_000_000, by: 997) {
            let civil = CivilCalendar.civil(fromDays: days)
            #expect(CivilCalendar.days(year: civil.year, month: civil.month, day: civil.day) == days)
        }
        #expect(CivilCalendar.days(year: 1970, month: 1, day: 1) == 0)
        #expect(CivilCalendar.split(-1) == (-1, 86399))
        #expect(CivilCalendar.split(86400) == (1, 0))
    }
}
