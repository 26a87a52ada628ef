/// What Foundation's `JSONDecoder` would accept in a request body that a strict reader refuses or reads
/// otherwise, found before the decoder sees the body:
/// - a name given twice in one object: parsers disagree on such a body (Foundation's keeps the first value,
///   JavaScript's, Python's and Go's the last), so a gateway and this server could read different values from
///   one request; it is refused instead, naming the field;
/// - a comma before `}` or `]`, which JSON (RFC 8259) does not allow and Foundation lets through.
///
/// One pass over the bytes, no recursion; names are compared after their escapes are decoded (`"user\u005fid"`
/// is `user_id`). Anything else a body may get wrong is left to the decoder to refuse.
enum JSONLeniency: Equatable {
    /// The path of a name repeated within one object (`items[0].product_id`).
    case repeatedName(String)
    /// A comma before the end of an object or array.
    case trailingComma

    /// An open object (its names seen, the current member's, whether a name comes next) or array (the index of
    /// its current element); changed in place, so a large object costs no copies of its names.
    private struct Frame {
        var names: Set<String>?
        var current: String?
        var expectsName = false
        var index = 0

        var codingKey: Key? {
            if names == nil { return Key(intValue: index) }
            return current.map(Key.init(stringValue:))
        }
    }

    /// A step of a field path, for ``HTTPRequest/fieldPath(_:)``.
    private struct Key: CodingKey {
        var stringValue: String
        var intValue: Int?
        init(stringValue: String) { self.stringValue = stringValue }
        init(intValue: Int) { (stringValue, self.intValue) = (String(intValue), intValue) }
    }

    /// The first of these leniencies in `bytes`, or nil.
    static func first(in bytes: [UInt8]) -> JSONLeniency? {
        var stack: [Frame] = []
        var position = 0
        var previous: UInt8 = 0  // the last byte outside strings that is not white space
        while position < bytes.count {
            let byte = bytes[position]
            position += 1
            switch byte {
            case UInt8(ascii: "{"):
                stack.append(Frame(names: [], expectsName: true))
            case UInt8(ascii: "["):
                stack.append(Frame())
            case UInt8(ascii: "}"), UInt8(ascii: "]"):
                if previous == UInt8(ascii: ",") { return .trailingComma }
                guard stack.popLast() != nil else { return nil }
            case UInt8(ascii: ","):
                guard !stack.isEmpty else { return nil }
                if stack[stack.count - 1].names == nil { stack[stack.count - 1].index += 1 } else { stack[stack.count - 1].expectsName = true }
            case UInt8(ascii: "\""):
                previous = byte
                guard let top = stack.indices.last, stack[top].names != nil, stack[top].expectsName else {
                    guard skipString(bytes, &position) else { return nil }  // a value: only its end matters
                    continue
                }
                guard let name = readString(bytes, &position) else { return nil }
                stack[top].current = name
                stack[top].expectsName = false
                guard stack[top].names!.insert(name).inserted else {
                    return .repeatedName(HTTPRequest.fieldPath(stack.compactMap(\.codingKey)))
                }
                continue
            case UInt8(ascii: " "), UInt8(ascii: "\t"), UInt8(ascii: "\n"), UInt8(ascii: "\r"):
                continue
            default:
                break
            }
            previous = byte
        }
        return nil
    }

    /// Moves `position` past the closing quote of the string whose opening quote was just read; false when it
    /// does not end.
    private static func skipString(_ bytes: [UInt8], _ position: inout Int) -> Bool {
        while position < bytes.count {
            let byte = bytes[position]
            position += byte == UInt8(ascii: "\\") ? 2 : 1
            if byte == UInt8(ascii: "\"") { return true }
        }
        return false
    }

    /// The string whose opening quote was just read, its escapes decoded, with `position` past its closing
    /// quote; nil when it does not end or an escape is malformed.
    private static func readString(_ bytes: [UInt8], _ position: inout Int) -> String? {
        var decoded: [UInt8] = []
        var pendingHighSurrogate: UInt32?
        while position < bytes.count {
            let byte = bytes[position]
            position += 1
            if byte == UInt8(ascii: "\"") { return String(decoding: decoded, as: UTF8.self) }
            guard byte == UInt8(ascii: "\\") else {
                decoded.append(byte)
                continue
            }
            guard position < bytes.count else { return nil }
            let escape = bytes[position]
            position += 1
            switch escape {
            case UInt8(ascii: "u"):
                guard position + 4 <= bytes.count, let unit = UInt32(String(decoding: bytes[position..<position + 4], as: UTF8.self), radix: 16) else {
                    return nil
                }
                position += 4
                var scalar = unit
                if (0xD800...0xDBFF).contains(unit) {
                    pendingHighSurrogate = unit
                    continue
                }
                if (0xDC00...0xDFFF).contains(unit), let high = pendingHighSurrogate {
                    scalar = 0x10000 + ((high - 0xD800) << 10) + (unit - 0xDC00)
                }
                pendingHighSurrogate = nil
                decoded.append(contentsOf: Array(String(Unicode.Scalar(scalar).map(Character.init) ?? "\u{FFFD}").utf8))
            case UInt8(ascii: "b"): decoded.append(0x08)
            case UInt8(ascii: "f"): decoded.append(0x0C)
            case UInt8(ascii: "n"): decoded.append(0x0A)
            case UInt8(ascii: "r"): decoded.append(0x0D)
            case UInt8(ascii: "t"): decoded.append(0x09)
            default: decoded.append(escape)  // \" \\ \/
            }
        }
        return nil
    }
}
