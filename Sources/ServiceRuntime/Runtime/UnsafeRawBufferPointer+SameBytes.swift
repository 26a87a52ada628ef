import Foundation

extension UnsafeRawBufferPointer {
    /// True when `other` holds exactly these bytes: one `memcmp`, not an element-by-element loop.
    @inlinable
    public func sameBytes(as other: UnsafeRawBufferPointer) -> Bool {
        count == other.count && (isEmpty || memcmp(baseAddress!, other.baseAddress!, count) == 0)
    }
}

extension UnsafeBufferPointer where Element == UInt8 {
    /// True when `other` holds exactly these bytes (`UnsafeRawBufferPointer.sameBytes(as:)`).
    @inlinable
    public func sameBytes(as other: UnsafeBufferPointer<UInt8>) -> Bool {
        UnsafeRawBufferPointer(self).sameBytes(as: UnsafeRawBufferPointer(other))
    }
}
