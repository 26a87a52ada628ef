/// RFC 9110 tokens (field names): the bytes they may hold, one bit each.
enum HTTPToken {
    /// The token bytes, all ASCII: bytes 0–63 in the first word, 64–127 in the second.
    private static let bytes: (low: UInt64, high: UInt64) = Array(
        "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789!#$%&'*+-.^_`|~".utf8
    ).reduce(into: (low: 0, high: 0)) { words, byte in
        if byte < 64 { words.low |= 1 << byte } else { words.high |= 1 << (byte - 64) }
    }

    /// Whether `name` is a token: not empty, every byte a token byte.
    static func isToken(_ name: some Collection<UInt8>) -> Bool {
        let table = bytes
        return !name.isEmpty && name.allSatisfy { byte in
            byte < 64 ? table.low & (1 << byte) != 0 : byte < 128 && table.high & (1 << (byte - 64)) != 0
        }
    }
}
