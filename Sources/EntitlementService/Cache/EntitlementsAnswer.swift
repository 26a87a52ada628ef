import Foundation
import ServiceRuntime

/// A cached `GET /v1/users/{user_id}/entitlements` answer: its JSON body as last served.
///
/// The body's keys are sorted, so it opens with `{"as_of":"` and the time of the answer, to the second. Served
/// in the second it was stamped with, the body goes out as it is, sharing the cache's bytes (the one copy is
/// the write's); served in a later second, its stamp is rewritten in place first, so a hit answers the time
/// of the answer with no encoding and no new body.
struct EntitlementsAnswer {
    /// What every body opens with, up to the `as_of` value.
    private static let head: [UInt8] = Array(#"{"as_of":""#.utf8)

    private var body: [UInt8]
    /// The second (Unix time) the body's `as_of` names.
    private var second: Int64
    /// How many bytes the `as_of` value takes.
    private var stampLength: Int

    /// `body`, encoded with `as_of` = `asOf`; nil when it does not open so.
    init?(body: [UInt8], asOf: Date) {
        let stamp = AsOfStamp(asOf)
        guard body.starts(with: Self.head), body.dropFirst(Self.head.count).starts(with: stamp.bytes) else { return nil }
        self.body = body
        second = stamp.second
        stampLength = stamp.bytes.count
    }

    /// The body with `as_of` = `stamp`'s second: as it is when it already says so, else restamped in place
    /// (a body handed out earlier keeps its own time: it is copied first). Its memory is prefetched: with many
    /// users held it is rarely in the CPU's caches, and the write that copies it comes a little later.
    mutating func body(stamp: AsOfStamp) -> [UInt8] {
        if stamp.second != second {
            let range = Self.head.count..<(Self.head.count + stampLength)
            if stamp.bytes.count == stampLength {
                body.withUnsafeMutableBufferPointer { body in
                    _ = stamp.bytes.withUnsafeBufferPointer { UnsafeMutableBufferPointer(rebasing: body[range]).update(fromContentsOf: $0) }
                }
            } else {
                body.replaceSubrange(range, with: stamp.bytes)
            }
            second = stamp.second
            stampLength = stamp.bytes.count
        }
        body.prefetch()  // the write copies it after the middleware and the machine have done their part
        return body
    }
}
