/// Base64 decoding that accepts exactly one spelling of each byte string, as a JWS must be read: the
/// base64url segments of a compact JWS (RFC 7515: `-` and `_`, no padding) and the standard base64 (with `=`
/// padding) of each `x5c` certificate. Anything else is refused: another alphabet, whitespace, missing or
/// extra padding, and set bits in the unused low end of the last character. So the text and the bytes
/// determine each other, and a certificate's text can stand for its DER.
enum StrictBase64 {
    /// The two alphabets, and whether the encoded text is padded to a multiple of four characters.
    enum Variant {
        /// RFC 4648 §5, unpadded (JWS segments).
        case url
        /// RFC 4648 §4, padded (`x5c` entries).
        case standard
    }

    /// The bytes `text` encodes in `variant`; nil unless `text` is their canonical encoding.
    static func decode(_ text: some Collection<UInt8>, _ variant: Variant) -> [UInt8]? {
        var count = text.count
        if variant == .standard {
            guard count % 4 == 0 else { return nil }
            var padding = 0
            var index = text.index(text.startIndex, offsetBy: count)
            while padding < 2, index > text.startIndex {
                let before = text.index(index, offsetBy: -1)
                guard text[before] == UInt8(ascii: "=") else { break }
                padding += 1
                index = before
            }
            count -= padding
        }
        // A single trailing character would encode 6 bits: no byte string ends like that.
        guard count % 4 != 1 else { return nil }
        let table = variant == .url ? urlTable : standardTable
        var bytes: [UInt8] = []
        bytes.reserveCapacity(count * 3 / 4)
        var accumulator: UInt32 = 0
        var bits = 0
        var remaining = count
        for character in text {
            guard remaining > 0 else { break }
            remaining -= 1
            let value = table[Int(character)]
            guard value < 64 else { return nil }
            accumulator = accumulator << 6 | UInt32(value)
            bits += 6
            if bits >= 8 {
                bits -= 8
                bytes.append(UInt8(truncatingIfNeeded: accumulator >> UInt32(bits)))
                accumulator &= (1 << UInt32(bits)) - 1
            }
        }
        // The unused low bits of the last character must be zero, or two texts would decode alike.
        guard accumulator == 0 else { return nil }
        return bytes
    }

    private static let urlTable = table("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
    private static let standardTable = table("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")

    /// Each byte's value in `alphabet`, 0xFF for bytes outside it.
    private static func table(_ alphabet: String) -> [UInt8] {
        var table = [UInt8](repeating: 0xFF, count: 256)
        for (value, character) in alphabet.utf8.enumerated() { table[Int(character)] = UInt8(value) }
        return table
    }
}
