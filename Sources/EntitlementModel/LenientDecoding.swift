import Foundation

/// Apple's verifyReceipt bodies type their values loosely: the same field arrives as `"1"`, `1` or `true`,
/// and dates as strings of milliseconds (sometimes fractional), as numbers, or as `yyyy-MM-dd HH:mm:ss Etc/GMT`
/// text. These readers accept every such spelling, treat `null` and a missing key alike, and throw a
/// `DecodingError` naming the key when a value is present but cannot mean what the field needs.
extension KeyedDecodingContainer {
    /// A string, or a number written as its decimal text. Empty strings count as absent.
    func appleString(_ key: Key) throws -> String? {
        guard try isPresent(key) else { return nil }
        if let text = try? decode(String.self, forKey: key) { return text.isEmpty ? nil : text }
        if let integer = try? decode(Int64.self, forKey: key) { return String(integer) }
        if let number = try? decode(Double.self, forKey: key) { return String(number) }
        throw DecodingError.typeMismatch(
            String.self,
            .init(codingPath: codingPath + [key], debugDescription: "expected a string or a number")
        )
    }

    /// A string or number that must be present: the field identifies something.
    func appleRequiredString(_ key: Key) throws -> String {
        guard let text = try appleString(key) else {
            throw DecodingError.keyNotFound(
                key, .init(codingPath: codingPath, debugDescription: "required field is missing or empty")
            )
        }
        return text
    }

    /// An integer written as a number (`21006`) or as a string (`"1"`).
    func appleInt(_ key: Key) throws -> Int? {
        guard try isPresent(key) else { return nil }
        // Apple mostly sends strings, so that spelling is tried first: every failed attempt costs an error.
        if let text = try? decode(String.self, forKey: key) {
            if let integer = Int(text.appleTrimmed) { return integer }
            throw corrupted(key, "expected an integer or a string holding one")
        }
        if let integer = try? decode(Int.self, forKey: key) { return integer }
        if let number = try? decode(Double.self, forKey: key), number.rounded() == number, abs(number) < 1e15 {
            return Int(number)
        }
        throw corrupted(key, "expected an integer or a string holding one")
    }

    /// A boolean written as `true`/`false`, `1`/`0`, or any of those as a string.
    func appleBool(_ key: Key) throws -> Bool? {
        guard try isPresent(key) else { return nil }
        if let text = try? decode(String.self, forKey: key) {
            switch text.appleTrimmed.lowercased() {
            case "true", "1": return true
            case "false", "0": return false
            default: throw corrupted(key, "expected a boolean (true/false/1/0, plain or as a string)")
            }
        }
        if let flag = try? decode(Bool.self, forKey: key) { return flag }
        if let integer = try? decode(Int.self, forKey: key), integer == 0 || integer == 1 { return integer == 1 }
        throw corrupted(key, "expected a boolean (true/false/1/0, plain or as a string)")
    }

    /// An instant in milliseconds since 1970, as a number or a string; fractional milliseconds are kept.
    func appleMilliseconds(_ key: Key) throws -> Date? {
        guard try isPresent(key) else { return nil }
        if let text = try? decode(String.self, forKey: key) {
            if let date = AppleDateText.parseMilliseconds(text) { return date }
            throw corrupted(key, "expected milliseconds since 1970 as a number or a string")
        }
        if let number = try? decode(Double.self, forKey: key) { return AppleDateText.date(milliseconds: number) }
        throw corrupted(key, "expected milliseconds since 1970 as a number or a string")
    }

    /// An instant from `msKey` when present, otherwise from the first present `textKeys` entry, which may hold
    /// milliseconds (iOS 6 `expires_date`) or Apple's `yyyy-MM-dd HH:mm:ss Etc/GMT` text.
    func appleDate(ms msKey: Key, text textKeys: Key...) throws -> Date? {
        if let date = try appleMilliseconds(msKey) { return date }
        for key in textKeys {
            guard let text = try appleString(key) else { continue }
            if let date = AppleDateText.parseMilliseconds(text) ?? AppleDateText.parseGMT(text) { return date }
            throw corrupted(key, "expected milliseconds or a `yyyy-MM-dd HH:mm:ss Etc/GMT` date, got \"\(text)\"")
        }
        return nil
    }

    /// `environment` as Apple spells it: `Production` (`PROD` in V1 notifications) or `Sandbox`. Any other
    /// value (Apple's StoreKit testing, say) yields `nil`: the endpoint that answered is the authority anyway.
    func appleEnvironment(_ key: Key) throws -> StoreEnvironment? {
        switch try appleString(key)?.lowercased() {
        case "production", "prod": .production
        case "sandbox": .sandbox
        default: nil
        }
    }

    /// A value that is present and not `null`.
    private func isPresent(_ key: Key) throws -> Bool {
        guard contains(key) else { return false }
        return try !decodeNil(forKey: key)
    }

    private func corrupted(_ key: Key, _ description: String) -> DecodingError {
        .dataCorruptedError(forKey: key, in: self, debugDescription: description)
    }
}

/// A list Apple sends either as a JSON array or, in the iOS 6 format, as one bare object.
struct OneOrMany<Element: Decodable>: Decodable {
    var elements: [Element]

    init(from decoder: any Decoder) throws {
        if var list = try? decoder.unkeyedContainer() {
            var elements: [Element] = []
            while !list.isAtEnd { elements.append(try list.decode(Element.self)) }
            self.elements = elements
        } else {
            elements = [try Element(from: decoder)]
        }
    }
}

/// Parsers for the two textual date forms of verifyReceipt bodies.
enum AppleDateText {
    /// `"1350157208197"` or `"1697679936049.7297"`: milliseconds since 1970.
    static func parseMilliseconds(_ text: String) -> Date? {
        let trimmed = text.appleTrimmed
        guard let first = trimmed.first, first.isNumber || first == "-",
              let number = Double(trimmed), number.isFinite
        else { return nil }
        return date(milliseconds: number)
    }

    /// The instant `milliseconds` after 1970-01-01T00:00:00Z.
    static func date(milliseconds: Double) -> Date {
        Date(timeIntervalSince1970: milliseconds / 1_000)
    }

    /// `"2011-02-17 06:20:57 Etc/GMT"` (also `GMT`/`UTC`, or no zone): the only zone this accepts is UTC,
    /// which is what Apple writes in the fields without a `_pst` suffix.
    static func parseGMT(_ text: String) -> Date? {
        let parts = text.split(separator: " ")
        guard parts.count == 2 || (parts.count == 3 && ["Etc/GMT", "GMT", "UTC", "Etc/UTC"].contains(parts[2])) else {
            return nil
        }
        let day = parts[0].split(separator: "-", omittingEmptySubsequences: false).map { Int($0) }
        let time = parts[1].split(separator: ":", omittingEmptySubsequences: false).map { Int($0) }
        guard day.count == 3, time.count == 3,
              let year = day[0], let month = day[1], let dayOfMonth = day[2],
              let hour = time[0], let minute = time[1], let second = time[2],
              (1...12).contains(month), (1...31).contains(dayOfMonth),
              (0...23).contains(hour), (0...59).contains(minute), (0...60).contains(second)
        else { return nil }
        let days = Int(CivilCalendar.days(year: year, month: month, day: dayOfMonth))
        return Date(timeIntervalSince1970: TimeInterval(days * 86_400 + hour * 3_600 + minute * 60 + second))
    }
}

extension String {
    /// Without leading and trailing spaces and tabs; the string itself in the usual case where it has none,
    /// without the Foundation bridging `trimmingCharacters` costs.
    var appleTrimmed: String {
        guard let first = utf8.first, let last = utf8.last,
              first == 0x20 || first == 0x09 || last == 0x20 || last == 0x09 else { return self }
        return String(drop { $0 == " " || $0 == "\t" }.reversed().drop { $0 == " " || $0 == "\t" }.reversed())
    }
}
