import Foundation
import Testing
import EntitlementModel

@Suite struct ISODurationTests {
    private func utc(_ text: String) -> Date {
        guard let date = RFC3339.date(from: text) else { preconditionFailure("bad test date \(text)") }
        return date
    }

    private func add(_ duration: String, to start: String) throws -> String {
        RFC3339.string(from: try ISODuration(parsing: duration).adding(to: utc(start)))
    }

    @Test func parsesSingleDesignators() throws {
        #expect(try ISODuration(parsing: "P3D") == ISODuration(days: 3))
        #expect(try ISODuration(parsing: "P2W") == ISODuration(weeks: 2))
        #expect(try ISODuration(parsing: "P1M") == ISODuration(months: 1))
        #expect(try ISODuration(parsing: "P1Y") == ISODuration(years: 1))
        #expect(try ISODuration(parsing: "PT36H") == ISODuration(hours: 36))
        #expect(try ISODuration(parsing: "PT90M") == ISODuration(minutes: 90))
        #expect(try ISODuration(parsing: "PT45S") == ISODuration(seconds: 45))
    }

    @Test func parsesCombinations() throws {
        #expect(try ISODuration(parsing: "P1Y2M10D") == ISODuration(years: 1, months: 2, days: 10))
        #expect(try ISODuration(parsing: "P1DT12H30M5S")
            == ISODuration(days: 1, hours: 12, minutes: 30, seconds: 5))
        #expect(try ISODuration(parsing: "P1M2W") == ISODuration(months: 1, weeks: 2))
        #expect(try ISODuration(parsing: "P1MT1M") == ISODuration(months: 1, minutes: 1))
        #expect(try ISODuration(parsing: "P0D").isZero)
        #expect(try !ISODuration(parsing: "P007D").isZero)
    }

    @Test(arguments: ["P1D", "P2W", "P1M", "P1Y", "P1Y2M10D", "P1M2W", "PT36H", "P1DT12H30M5S", "PT5S", "P0D"])
    func formatsCanonically(text: String) throws {
        let duration = try ISODuration(parsing: text)
        #expect(duration.description == text)
        #expect(try ISODuration(parsing: duration.description) == duration)
    }

    @Test func dropsZeroComponentsWhenFormatting() throws {
        #expect(try ISODuration(parsing: "P0Y1M0D").description == "P1M")
        #expect(try ISODuration(parsing: "PT0S").description == "P0D")
        #expect(ISODuration(days: 1, seconds: 1).description == "P1DT1S")
    }

    @Test(arguments: [
        ("", "must start with \"P\""),
        ("1M", "must start with \"P\""),
        ("p1m", "must start with \"P\""),
        ("P", "has no components"),
        ("PT", "\"T\" must be followed by hours, minutes or seconds"),
        ("P1DT", "\"T\" must be followed by hours, minutes or seconds"),
        ("PT1HT1M", "\"T\" appears twice"),
        ("P1", "the number at the end has no designator"),
        ("PD", "expected a number at offset 1"),
        ("P-1M", "expected a number at offset 1"),
        ("P 1M", "expected a number at offset 1"),
        ("P1.5M", "fractions are not supported"),
        ("P1,5Y", "fractions are not supported"),
        ("P1M1Y", "unexpected \"Y\" at offset 4"),
        ("P1Y1Y", "unexpected \"Y\" at offset 4"),
        ("P1H", "unexpected \"H\" at offset 2"),
        ("PT1D", "unexpected \"D\" at offset 3"),
        ("P1m", "unexpected \"m\" at offset 2"),
        ("P1000000Y", "a component is larger than 999999"),
        ("P99999999999999999999999D", "a component is larger than 999999"),
    ])
    func rejectsMalformedText(text: String, reason: String) {
        #expect(throws: ISODurationError.self) { try ISODuration(parsing: text) }
        do {
            _ = try ISODuration(parsing: text)
        } catch {
            #expect(error.reason == reason)
            #expect(error.description == "invalid ISO 8601 duration \"\(text)\": \(reason)")
        }
    }

    @Test func shortensLongInputInErrors() {
        let text = "P" + String(repeating: "x", count: 500)
        do {
            _ = try ISODuration(parsing: text)
            Issue.record("accepted \(text)")
        } catch {
            #expect(error.input.count == 65)
            #expect(error.input.hasSuffix("…"))
        }
    }

    @Test func clampsToTheEndOfShorterMonths() throws {
        #expect(try add("P1M", to: "2026-01-31T10:00:00Z") == "2026-02-28T10:00:00Z")
        #expect(try add("P1M", to: "2028-01-31T10:00:00Z") == "2028-02-29T10:00:00Z")
        #expect(try add("P1M", to: "2026-03-31T00:00:00Z") == "2026-04-30T00:00:00Z")
        #expect(try add("P1M", to: "2026-02-28T00:00:00Z") == "2026-03-28T00:00:00Z")
        #expect(try add("P3M", to: "2026-11-30T23:59:59Z") == "2027-02-28T23:59:59Z")
        #expect(try add("P1Y", to: "2028-02-29T12:00:00Z") == "2029-02-28T12:00:00Z")
        #expect(try add("P4Y", to: "2028-02-29T12:00:00Z") == "2032-02-29T12:00:00Z")
    }

    @Test func addsAcrossYearEnds() throws {
        #expect(try add("P1M", to: "2026-12-15T08:30:00Z") == "2027-01-15T08:30:00Z")
        #expect(try add("P13M", to: "2026-12-15T08:30:00Z") == "2028-01-15T08:30:00Z")
        #expect(try add("P1Y", to: "1969-12-31T23:59:59Z") == "1970-12-31T23:59:59Z")
        #expect(try add("P1M", to: "1900-01-31T00:00:00Z") == "1900-02-28T00:00:00Z")
    }

    @Test func addsMonthsBeforeDaysAndTimeAfterDays() throws {
        // Months first: Jan 30 + 1 month = Feb 28, + 1 day = Mar 1 (days first would give Feb 28).
        #expect(try add("P1M1D", to: "2026-01-30T00:00:00Z") == "2026-03-01T00:00:00Z")
        #expect(try add("P1Y2M10D", to: "2026-01-31T00:00:00Z") == "2027-04-10T00:00:00Z")
        #expect(try add("P2W", to: "2026-02-20T06:00:00Z") == "2026-03-06T06:00:00Z")
        #expect(try add("P7D", to: "2028-02-25T06:00:00Z") == "2028-03-03T06:00:00Z")
        #expect(try add("PT36H", to: "2026-11-22T18:00:00Z") == "2026-11-24T06:00:00Z")
        #expect(try add("P1DT1H1M1S", to: "2026-12-31T22:58:59Z") == "2027-01-02T00:00:00Z")
        #expect(try add("P0D", to: "2026-12-31T22:58:59Z") == "2026-12-31T22:58:59Z")
    }

    @Test func keepsTheFractionOfASecond() throws {
        let start = Date(timeIntervalSince1970: 1_767_225_600.25)  // 2026-01-01T00:00:00.25Z
        let end = try ISODuration(parsing: "P1D").adding(to: start)
        #expect(end.timeIntervalSince(start) == 86400)
    }

    @Test func codesAsItsText() throws {
        struct Box: Codable, Equatable { var duration: ISODuration }
        let json = try JSONEncoder().encode(Box(duration: ISODuration(years: 1, months: 2)))
        #expect(String(decoding: json, as: UTF8.self) == #"{"duration":"P1Y2M"}"#)
        #expect(try JSONDecoder().decode(Box.self, from: json) == Box(duration: ISODuration(years: 1, months: 2)))
        #expect(throws: DecodingError.self) {
            try JSONDecoder().decode(Box.self, from: Data(#"{"duration":"1 month"}"#.utf8))
        }
    }
}
