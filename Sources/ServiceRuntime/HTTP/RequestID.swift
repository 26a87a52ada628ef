import Synchronization

/// Request ids: the client's own `X-Request-Id` when it is sane, else a fresh one.
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

    /// splitmix64 state: a random start, then a fixed odd step per id. Its output function is a bijection,
    /// so ids never repeat within a process, and processes sharing a port start far apart.
    private static let state = Atomic<UInt64>(UInt64.random(in: .min ... .max))
    private static let step: UInt64 = 0x9E37_79B9_7F4A_7C15

    /// The digits of a generated id, six bits each.
    private static let digits: StaticString = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz-_"

    /// 15 characters of `[0-9A-Za-z_-]`, 90 bits of two consecutive splitmix64 outputs: the first 64 bits are
    /// one output whole, so ids never repeat within a process. Fifteen is as long as a Swift string is kept
    /// inline, so an id costs no allocation and no reference counting wherever it is copied. Unique and
    /// unguessable enough to correlate logs; not a secret.
    static func generate() -> String {
        let first = state.wrappingAdd(2 &* step, ordering: .relaxed).newValue
        let high = mix(first &- step)
        let low = mix(first)
        return String(unsafeUninitializedCapacity: 15) { buffer in
            let table = digits.utf8Start
            func digit(_ value: UInt64) -> UInt8 { table[Int(truncatingIfNeeded: value & 0x3F)] }
            for index in 0..<10 {
                buffer[index] = digit(high >> UInt64(58 - 6 * index))
            }
            buffer[10] = digit(high << 2 | low >> 62)
            for index in 0..<4 {
                buffer[11 + index] = digit(low >> UInt64(56 - 6 * index))
            }
            return 15
        }
    }

    private static func mix(_ value: UInt64) -> UInt64 {
        var z = value
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
