extension Array where Element == UInt8 {
    /// Appends the UTF-8 bytes of `text` in one copy (from its storage in place: no copy of the string, so no
    /// reference counting, for a native one).
    mutating func append(utf8 text: String) {
        if text.utf8.withContiguousStorageIfAvailable({ append(contentsOf: $0) }) == nil {
            append(contentsOf: text.utf8)
        }
    }

    /// Appends the bytes of a literal.
    mutating func append(literal: StaticString) {
        append(contentsOf: UnsafeBufferPointer(start: literal.utf8Start, count: literal.utf8CodeUnitCount))
    }

    /// Appends `value` in decimal, with a leading `-` when negative.
    mutating func append(decimal value: Int) {
        if value < 0 { append(UInt8(ascii: "-")) }
        var magnitude = value.magnitude
        var scratch: (UInt64, UInt64, UInt64) = (0, 0, 0)  // room for the 20 digits of UInt64.max
        Swift.withUnsafeMutableBytes(of: &scratch) { digits in
            var index = digits.count
            repeat {
                index -= 1
                digits[index] = UInt8(truncatingIfNeeded: magnitude % 10) + 0x30
                magnitude /= 10
            } while magnitude > 0
            append(contentsOf: digits[index...])
        }
    }
}
