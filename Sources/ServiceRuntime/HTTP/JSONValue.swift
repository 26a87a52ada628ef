/// A JSON value of any shape: used for the extension members of problem documents (such as `apple_status`).
public enum JSONValue: Sendable, Equatable, Codable,
    ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByFloatLiteral,
    ExpressibleByBooleanLiteral, ExpressibleByNilLiteral, ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral
{
    case string(String)
    case int(Int)
    case double(Double)
    case bool(Bool)
    case null
    case array([JSONValue])
    case object([String: JSONValue])

    /// A string literal is `.string`.
    public init(stringLiteral value: String) { self = .string(value) }
    /// An integer literal is `.int`, never `.double`.
    public init(integerLiteral value: Int) { self = .int(value) }
    /// A floating-point literal is `.double`.
    public init(floatLiteral value: Double) { self = .double(value) }
    /// `true` or `false` is `.bool`.
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    /// `nil` is `.null`, JSON's `null`.
    public init(nilLiteral: ()) { self = .null }
    /// An array literal is `.array`, in order.
    public init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
    /// A dictionary literal is `.object`; of repeated keys the last wins.
    public init(dictionaryLiteral elements: (String, JSONValue)...) {
        self = .object(Dictionary(elements, uniquingKeysWith: { _, last in last }))
    }

    public init(from decoder: Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let value = try? container.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? container.decode(Int.self) {
            self = .int(value)
        } else if let value = try? container.decode(Double.self) {
            self = .double(value)
        } else if let value = try? container.decode(String.self) {
            self = .string(value)
        } else if let value = try? container.decode([JSONValue].self) {
            self = .array(value)
        } else {
            self = .object(try container.decode([String: JSONValue].self))
        }
    }

    public func encode(to encoder: Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .string(let value): try container.encode(value)
        case .int(let value): try container.encode(value)
        case .double(let value): try container.encode(value)
        case .bool(let value): try container.encode(value)
        case .null: try container.encodeNil()
        case .array(let value): try container.encode(value)
        case .object(let value): try container.encode(value)
        }
    }

    /// The compact JSON text of this value; object keys are sorted so the output is stable.
    public var jsonText: String {
        var out = ""
        write(to: &out)
        return out
    }

    /// Appends the compact JSON text of this value; object keys are sorted so the output is stable.
    /// Non-finite doubles, which JSON cannot express, are written as `null`.
    func write(to out: inout String) {
        switch self {
        case .string(let value): Self.writeString(value, to: &out)
        case .int(let value): out += String(value)
        case .double(let value): out += value.isFinite ? "\(value)" : "null"
        case .bool(let value): out += value ? "true" : "false"
        case .null: out += "null"
        case .array(let values):
            out += "["
            for (index, value) in values.enumerated() {
                if index > 0 { out += "," }
                value.write(to: &out)
            }
            out += "]"
        case .object(let members):
            out += "{"
            for (index, key) in members.keys.sorted().enumerated() {
                if index > 0 { out += "," }
                Self.writeString(key, to: &out)
                out += ":"
                members[key]!.write(to: &out)
            }
            out += "}"
        }
    }

    /// Writes `value` as a JSON string literal, escaping quotes, backslashes and control characters.
    static func writeString(_ value: String, to out: inout String) {
        out += "\""
        for scalar in value.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where scalar.value < 0x20:
                let hex = String(scalar.value, radix: 16)
                out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: out.unicodeScalars.append(scalar)
            }
        }
        out += "\""
    }
}
