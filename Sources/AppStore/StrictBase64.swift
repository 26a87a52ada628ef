/// Base64 decoding that accepts exactly one spelling of each byte string, as a JWS must be read: the
/// base64url segments of a compact JWS (RFC 7515: `-` and `_`, no padding) and the standard base64 (with `=`
/// padding) of each `x5c` certificate. Anything else is refused: another alphabet, whitespace, missing or
/// extra padding, and set bits in the unused low end of the last character. So the text and the bytes
/// determine each other, and a certificate's text can stand for its DER.
public enum StrictBase64 {
    /// The two alphabets, and whether the encoded text is padded to a multiple of four characters.
    public enum Variant: Sendable {
        /// RFC 4648 §5, unpadded (JWS segments).
        case url
        /// RFC 4648 §4, padded (`x5c` entries).
        case standard
    }

    /// The bytes `text` encodes in `variant`; nil unless `text` is their canonical encoding.
    public static func decode(_ text: some Collection<UInt8>, _ variant: Variant) -> [UInt8]? {
        if let decoded = text.withContiguousStorageIfAvailable({ decode($0, variant) }) { return decoded }
        return Array(text).withUnsafeBufferPointer { decode($0, variant) }
    }

    private static func decode(_ text: UnsafeBufferPointer<UInt8>, _ variant: Variant) -> [UInt8]? {
        var count = text.count
        if variant == .standard {
            guard count % 4 == 0 else { return nil }
            if count > 0, text[count - 1] == UInt8(ascii: "=") { count -= 1 }
            if count > 0, text[count - 1] == UInt8(ascii: "=") { count -= 1 }
        }
        // A single trailing character would encode 6 bits: no byte string ends like that.
        let tail = count % 4
        guard tail != 1 else { return nil }
        // The padding, when there is, completes exactly the last group.
        guard variant == .url || (text.count - count) == (4 - tail) % 4 else { return nil }
        let table = variant == .url ? urlTable : standardTable
        let groups = count / 4
        let size = groups * 3 + (tail == 0 ? 0 : tail - 1)
        var valid = true
        let bytes = [UInt8](unsafeUninitializedCapacity: size) { output, initialized in
            table.withUnsafeBufferPointer { table in
                var bad: UInt8 = 0
                var out = 0
                for group in 0..<groups {
                    let at = group * 4
                    let a = table[Int(text[at])], b = table[Int(text[at + 1])], c = table[Int(text[at + 2])], d = table[Int(text[at + 3])]
                    bad |= a | b | c | d
                    let word = UInt32(a & 63) << 18 | UInt32(b & 63) << 12 | UInt32(c & 63) << 6 | UInt32(d & 63)
                    output[out] = UInt8(truncatingIfNeeded: word >> 16)
                    output[out + 1] = UInt8(truncatingIfNeeded: word >> 8)
                    output[out + 2] = UInt8(truncatingIfNeeded: word)
                    out += 3
                }
                if tail > 0 {
                    let at = groups * 4
                    let a = table[Int(text[at])], b = table[Int(text[at + 1])], c = tail == 3 ? table[Int(text[at + 2])] : 0
                    bad |= a | b | c
                    let word = UInt32(a & 63) << 18 | UInt32(b & 63) << 12 | UInt32(c & 63) << 6
                    output[out] = UInt8(truncatingIfNeeded: word >> 16)
                    if tail == 3 { output[out + 1] = UInt8(truncatingIfNeeded: word >> 8) }
                    // The unused low bits of the last character must be zero, or two texts would decode alike.
                    if word & (tail == 3 ? 0xFF : 0xFFFF) != 0 { bad |= 0x80 }
                }
                valid = bad & 0x80 == 0
                initialized = size
            }
        }
        return valid ? bytes : nil
    }

    private static let urlTable = table("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
    private static let standardTable = table("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")

    /// Each byte's value in `alphabet`; 0x80 (the flag of a bad character) for bytes outside it.
    private static func table(_ alphabet: String) -> [UInt8] {
        var table = [UInt8](repeating: 0x80, count: 256)
        for (value, character) in alphabet.utf8.enumerated() { table[Int(character)] = UInt8(value) }
        return table
    }
}
