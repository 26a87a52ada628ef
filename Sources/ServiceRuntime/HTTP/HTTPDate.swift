import Foundation

/// The `Date` header value (IMF-fixdate), formatted at most once per second.
@Loop
enum HTTPDate {
    private static var cachedSecond = 0
    private static var cachedText = ""

    /// Now, as `Sun, 06 Nov 1994 08:49:37 GMT`.
    static func now() -> String {
        let second = time(nil)
        if second != cachedSecond || cachedText.isEmpty {
            cachedSecond = second
            cachedText = format(second)
        }
        return cachedText
    }

    nonisolated static func format(_ second: Int) -> String {
        var seconds = second
        var parts = tm()
        gmtime_r(&seconds, &parts)
        let days = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
        let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
        func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }
        return "\(days[Int(parts.tm_wday)]), \(two(parts.tm_mday)) \(months[Int(parts.tm_mon)]) \(parts.tm_year + 1900) "
            + "\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec)) GMT"
    }
}
