import Foundation
import Timestamps

/// An `as_of` value to stamp answers with: one second, written once for every answer served in it.
struct AsOfStamp {
    /// The second (Unix time).
    let second: Int64
    /// Its RFC 3339 text.
    let bytes: [UInt8]

    /// The stamp of the second `date` falls in (RFC 3339, whole seconds, as `as_of` writes it).
    init(_ date: Date) {
        second = Self.second(of: date)
        var bytes = [UInt8]()
        bytes.reserveCapacity(24)  // `2026-11-27T14:46:16Z`: one allocation
        RFC3339.append(date, to: &bytes)
        self.bytes = bytes
    }

    /// True when `date` falls in this stamp's second.
    func covers(_ date: Date) -> Bool {
        Self.second(of: date) == second
    }

    /// The whole second `date` falls in, as `as_of` truncates it.
    private static func second(of date: Date) -> Int64 {
        Int64(date.timeIntervalSince1970.rounded(.down))
    }
}
