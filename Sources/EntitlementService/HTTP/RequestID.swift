/// Request ids: the client's own `X-Request-Id` when it is sane, else a fresh random one.
enum RequestID {
    /// The longest client-supplied id kept.
    static let maxLength = 128

    /// The incoming id when it is 1–128 visible ASCII characters (no spaces or controls), else a new one.
    static func accept(_ incoming: String?) -> String {
        if let incoming, isSane(incoming) { return incoming }
        return generate()
    }

    static func isSane(_ id: String) -> Bool {
        let bytes = id.utf8
        return !bytes.isEmpty && bytes.count <= maxLength && bytes.allSatisfy { $0 > 0x20 && $0 < 0x7F }
    }

    /// 32 lowercase hex digits from the system's random source.
    static func generate() -> String {
        var generator = SystemRandomNumberGenerator()
        let high = generator.next()
        let low = generator.next()
        let digits = Array("0123456789abcdef".utf8)
        return String(unsafeUninitializedCapacity: 32) { buffer in
            for index in 0..<16 {
                buffer[index] = digits[Int(truncatingIfNeeded: high >> (60 - 4 * UInt64(index))) & 0xF]
                buffer[16 + index] = digits[Int(truncatingIfNeeded: low >> (60 - 4 * UInt64(index))) & 0xF]
            }
            return 32
        }
    }
}
