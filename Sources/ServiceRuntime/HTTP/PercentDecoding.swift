/// Percent-decoding of URL path segments and query components (RFC 3986).
///
/// `+` is left as it is: only `%XX` escapes are decoded, so a `+` in an RFC 3339 offset survives. The result
/// must be valid UTF-8; a malformed escape or invalid UTF-8 gives nil.
enum PercentDecoding {
    /// The decoded form of `text`, or nil when it holds a malformed escape or decodes to invalid UTF-8.
    static func decode<S: StringProtocol>(_ text: S) -> String? {
        guard text.utf8.contains(UInt8(ascii: "%")) else { return String(text) }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(text.utf8.count)
        var iterator = text.utf8.makeIterator()
        while let byte = iterator.next() {
            guard byte == UInt8(ascii: "%") else {
                bytes.append(byte)
                continue
            }
            guard let high = iterator.next().flatMap(hexValue), let low = iterator.next().flatMap(hexValue) else {
                return nil
            }
            bytes.append(high << 4 | low)
        }
        return String(validating: bytes, as: UTF8.self)
    }

    /// Splits a raw query (`a=1&b=x%20y`) into decoded pairs, the last of repeated names winning, and its first
    /// problem: a name given twice (decoded: `%61` is `a`), or a pair whose name or value is malformed (left out;
    /// named as decoded, or as sent when the name itself is malformed).
    /// Splits on the bytes `&` and `=` (ASCII, so every split falls between characters) rather than on
    /// `Character`s, which would break the text into grapheme clusters first.
    static func decodeQuery(_ raw: String) -> (values: [String: String], problem: HTTPQueryProblem?) {
        var result: [String: String] = [:]
        var problem: HTTPQueryProblem?
        let utf8 = raw.utf8
        var start = utf8.startIndex
        while start < utf8.endIndex {
            let end = utf8[start...].firstIndex(of: UInt8(ascii: "&")) ?? utf8.endIndex
            if start < end {
                let pair = raw[start..<end]
                let equals = pair.utf8.firstIndex(of: UInt8(ascii: "="))
                let rawName = pair[..<(equals ?? pair.endIndex)]
                let name = decode(rawName)
                if let name, let value = equals.map({ decode(pair[pair.utf8.index(after: $0)...]) }) ?? "" {
                    if result.updateValue(value, forKey: name) != nil, problem == nil { problem = .repeated(name: name) }
                } else if problem == nil {
                    problem = .malformed(name: name ?? String(rawName))
                }
            }
            start = end < utf8.endIndex ? utf8.index(after: end) : end
        }
        return (result, problem)
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}
