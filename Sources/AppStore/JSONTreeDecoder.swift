/// A `Decoder` over a parsed `JSONTree`, so that the model's `Decodable` types read a signed payload without
/// Foundation's `JSONDecoder`. It follows `JSONDecoder`'s rules: a number decodes as an integer type only when
/// it has an exact value of that type, a string only as `String`, `null` only through `decodeNil`; failures are
/// `DecodingError`s with the coding path, as the model's error reporting expects.
struct JSONTreeDecoder: Decoder {
    let value: JSONTree
    let codingPath: [any CodingKey]
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    init(_ value: JSONTree, codingPath: [any CodingKey] = []) {
        self.value = value
        self.codingPath = codingPath
    }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        guard case .object(let members) = value else { throw mismatch([String: Any].self, value, codingPath) }
        return KeyedDecodingContainer(Keyed(members: members, codingPath: codingPath))
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        guard case .array(let elements) = value else { throw mismatch([Any].self, value, codingPath) }
        return Unkeyed(elements: elements, codingPath: codingPath)
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer { Single(value: value, codingPath: codingPath) }

    /// The position of an element in a list, as a coding key.
    struct Index: CodingKey {
        var intValue: Int?
        var stringValue: String { "Index \(intValue ?? 0)" }
        init(intValue: Int) { self.intValue = intValue }
        init?(stringValue: String) { nil }
    }

    private struct Keyed<Key: CodingKey>: KeyedDecodingContainerProtocol {
        let members: JSONObject
        let codingPath: [any CodingKey]

        var allKeys: [Key] { members.names.compactMap(Key.init(stringValue:)) }

        func contains(_ key: Key) -> Bool { members[key.stringValue] != nil }

        private func member(_ key: Key) throws -> JSONTree {
            guard let value = members[key.stringValue] else {
                throw DecodingError.keyNotFound(key, .init(codingPath: codingPath, debugDescription: "No value for key \"\(key.stringValue)\"."))
            }
            return value
        }

        func decodeNil(forKey key: Key) throws -> Bool {
            if case .null = try member(key) { return true }
            return false
        }

        func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool { try scalar(member(key), codingPath + [key] as [any CodingKey]) }
        func decode(_ type: String.Type, forKey key: Key) throws -> String { try scalar(member(key), codingPath + [key] as [any CodingKey]) }
        func decode(_ type: Double.Type, forKey key: Key) throws -> Double { try scalar(member(key), codingPath + [key] as [any CodingKey]) }
        func decode(_ type: Float.Type, forKey key: Key) throws -> Float { try scalar(member(key), codingPath + [key] as [any CodingKey]) }
        func decode(_ type: Int.Type, forKey key: Key) throws -> Int { try scalar(member(key), codingPath + [key] as [any CodingKey]) }
        func decode(_ type: Int8.Type, forKey key: Key) throws -> Int8 { try scalar(member(key), codingPath + [key] as [any CodingKey]) }
        func decode(_ type: Int16.Type, forKey key: Key) throws -> Int16 { try scalar(member(key), codingPath + [key] as [any CodingKey]) }
        func decode(_ type: Int32.Type, forKey key: Key) throws -> Int32 { try scalar(member(key), codingPath + [key] as [any CodingKey]) }
        func decode(_ type: Int64.Type, forKey key: Key) throws -> Int64 { try scalar(member(key), codingPath + [key] as [any CodingKey]) }
        func decode(_ type: UInt.Type, forKey key: Key) throws -> UInt { try scalar(member(key), codingPath + [key] as [any CodingKey]) }
        func decode(_ type: UInt8.Type, forKey key: Key) throws -> UInt8 { try scalar(member(key), codingPath + [key] as [any CodingKey]) }
        func decode(_ type: UInt16.Type, forKey key: Key) throws -> UInt16 { try scalar(member(key), codingPath + [key] as [any CodingKey]) }
        func decode(_ type: UInt32.Type, forKey key: Key) throws -> UInt32 { try scalar(member(key), codingPath + [key] as [any CodingKey]) }
        func decode(_ type: UInt64.Type, forKey key: Key) throws -> UInt64 { try scalar(member(key), codingPath + [key] as [any CodingKey]) }

        func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T {
            try decodeValue(T.self, member(key), codingPath + [key])
        }

        func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type, forKey key: Key) throws -> KeyedDecodingContainer<NestedKey> {
            try JSONTreeDecoder(member(key), codingPath: codingPath + [key]).container(keyedBy: type)
        }

        func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
            try JSONTreeDecoder(member(key), codingPath: codingPath + [key]).unkeyedContainer()
        }

        func superDecoder() throws -> any Decoder {
            JSONTreeDecoder(.object(members), codingPath: codingPath)
        }

        func superDecoder(forKey key: Key) throws -> any Decoder {
            JSONTreeDecoder(members[key.stringValue] ?? .null, codingPath: codingPath + [key])
        }
    }

    private struct Unkeyed: UnkeyedDecodingContainer {
        let elements: [JSONTree]
        let codingPath: [any CodingKey]
        var currentIndex = 0

        init(elements: [JSONTree], codingPath: [any CodingKey]) {
            self.elements = elements
            self.codingPath = codingPath
        }

        var count: Int? { elements.count }
        var isAtEnd: Bool { currentIndex >= elements.count }

        private var path: [any CodingKey] { codingPath + [Index(intValue: currentIndex)] }

        private mutating func next<T>(_ type: T.Type) throws -> JSONTree {
            guard !isAtEnd else {
                throw DecodingError.valueNotFound(type, .init(codingPath: path, debugDescription: "Unkeyed container is at end."))
            }
            return elements[currentIndex]
        }

        mutating func decodeNil() throws -> Bool {
            guard case .null = try next(Never.self) else { return false }
            currentIndex += 1
            return true
        }

        private mutating func scalarNext<T: JSONScalar>(_ type: T.Type) throws -> T {
            let value: T = try scalar(next(type), self.path)
            currentIndex += 1
            return value
        }

        mutating func decode(_ type: Bool.Type) throws -> Bool { try scalarNext(type) }
        mutating func decode(_ type: String.Type) throws -> String { try scalarNext(type) }
        mutating func decode(_ type: Double.Type) throws -> Double { try scalarNext(type) }
        mutating func decode(_ type: Float.Type) throws -> Float { try scalarNext(type) }
        mutating func decode(_ type: Int.Type) throws -> Int { try scalarNext(type) }
        mutating func decode(_ type: Int8.Type) throws -> Int8 { try scalarNext(type) }
        mutating func decode(_ type: Int16.Type) throws -> Int16 { try scalarNext(type) }
        mutating func decode(_ type: Int32.Type) throws -> Int32 { try scalarNext(type) }
        mutating func decode(_ type: Int64.Type) throws -> Int64 { try scalarNext(type) }
        mutating func decode(_ type: UInt.Type) throws -> UInt { try scalarNext(type) }
        mutating func decode(_ type: UInt8.Type) throws -> UInt8 { try scalarNext(type) }
        mutating func decode(_ type: UInt16.Type) throws -> UInt16 { try scalarNext(type) }
        mutating func decode(_ type: UInt32.Type) throws -> UInt32 { try scalarNext(type) }
        mutating func decode(_ type: UInt64.Type) throws -> UInt64 { try scalarNext(type) }

        mutating func decode<T: Decodable>(_ type: T.Type) throws -> T {
            let value = try decodeValue(T.self, next(type), path)
            currentIndex += 1
            return value
        }

        mutating func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type) throws -> KeyedDecodingContainer<NestedKey> {
            let container = try JSONTreeDecoder(next(type), codingPath: path).container(keyedBy: type)
            currentIndex += 1
            return container
        }

        mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer {
            let container = try JSONTreeDecoder(next([Any].self), codingPath: path).unkeyedContainer()
            currentIndex += 1
            return container
        }

        mutating func superDecoder() throws -> any Decoder {
            let decoder = JSONTreeDecoder(try next(Any.self), codingPath: path)
            currentIndex += 1
            return decoder
        }
    }

    private struct Single: SingleValueDecodingContainer {
        let value: JSONTree
        let codingPath: [any CodingKey]

        func decodeNil() -> Bool {
            if case .null = value { return true }
            return false
        }

        func decode(_ type: Bool.Type) throws -> Bool { try scalar(value, codingPath) }
        func decode(_ type: String.Type) throws -> String { try scalar(value, codingPath) }
        func decode(_ type: Double.Type) throws -> Double { try scalar(value, codingPath) }
        func decode(_ type: Float.Type) throws -> Float { try scalar(value, codingPath) }
        func decode(_ type: Int.Type) throws -> Int { try scalar(value, codingPath) }
        func decode(_ type: Int8.Type) throws -> Int8 { try scalar(value, codingPath) }
        func decode(_ type: Int16.Type) throws -> Int16 { try scalar(value, codingPath) }
        func decode(_ type: Int32.Type) throws -> Int32 { try scalar(value, codingPath) }
        func decode(_ type: Int64.Type) throws -> Int64 { try scalar(value, codingPath) }
        func decode(_ type: UInt.Type) throws -> UInt { try scalar(value, codingPath) }
        func decode(_ type: UInt8.Type) throws -> UInt8 { try scalar(value, codingPath) }
        func decode(_ type: UInt16.Type) throws -> UInt16 { try scalar(value, codingPath) }
        func decode(_ type: UInt32.Type) throws -> UInt32 { try scalar(value, codingPath) }
        func decode(_ type: UInt64.Type) throws -> UInt64 { try scalar(value, codingPath) }

        func decode<T: Decodable>(_ type: T.Type) throws -> T { try decodeValue(T.self, value, codingPath) }
    }
}

/// A type a JSON scalar decodes to directly.
private protocol JSONScalar {
    /// The value `json` holds as this type; nil when it holds none.
    static func from(_ json: JSONTree) -> Self?
}

extension Bool: JSONScalar {
    fileprivate static func from(_ json: JSONTree) -> Bool? {
        if case .bool(let flag) = json { flag } else { nil }
    }
}

extension String: JSONScalar {
    fileprivate static func from(_ json: JSONTree) -> String? {
        if case .string(let text) = json { text } else { nil }
    }
}

extension Double: JSONScalar {
    fileprivate static func from(_ json: JSONTree) -> Double? {
        guard case .number(let text) = json, let number = Double(text), number.isFinite else { return nil }
        return number
    }
}

extension Float: JSONScalar {
    fileprivate static func from(_ json: JSONTree) -> Float? {
        guard case .number(let text) = json, let number = Float(text), number.isFinite else { return nil }
        return number
    }
}

extension JSONScalar where Self: FixedWidthInteger {
    /// An integer written as one, or a number with an exact value of this type (`1.0`, `1e3`).
    fileprivate static func from(_ json: JSONTree) -> Self? {
        guard case .number(let text) = json else { return nil }
        if let integer = Self(text) { return integer }
        guard let number = Double(text), number.isFinite else { return nil }
        return Self(exactly: number)
    }
}

extension Int: JSONScalar {}
extension Int8: JSONScalar {}
extension Int16: JSONScalar {}
extension Int32: JSONScalar {}
extension Int64: JSONScalar {}
extension UInt: JSONScalar {}
extension UInt8: JSONScalar {}
extension UInt16: JSONScalar {}
extension UInt32: JSONScalar {}
extension UInt64: JSONScalar {}

/// `json` as `T`, or the `DecodingError` `JSONDecoder` would throw.
private func scalar<T: JSONScalar>(_ json: JSONTree, _ codingPath: @autoclosure () -> [any CodingKey]) throws -> T {
    if let value = T.from(json) { return value }
    if case .null = json {
        throw DecodingError.valueNotFound(T.self, .init(codingPath: codingPath(), debugDescription: "Expected a value but found null instead."))
    }
    throw mismatch(T.self, json, codingPath())
}

/// `json` decoded as `T`, through `T`'s own `init(from:)` unless it is a scalar.
private func decodeValue<T: Decodable>(_ type: T.Type, _ json: JSONTree, _ codingPath: [any CodingKey]) throws -> T {
    if let scalarType = T.self as? any JSONScalar.Type {
        return try scalar(json, codingPath, as: scalarType) as! T
    }
    return try T(from: JSONTreeDecoder(json, codingPath: codingPath))
}

private func scalar<S: JSONScalar>(_ json: JSONTree, _ codingPath: [any CodingKey], as type: S.Type) throws -> S {
    try scalar(json, codingPath) as S
}

private func mismatch(_ type: Any.Type, _ json: JSONTree, _ codingPath: [any CodingKey]) -> DecodingError {
    // Constant texts without the type's name: the `try?` attempts of the model's lenient readers throw these
    // often, and building a text would cost more than the rest of the error.
    let description = switch json {
    case .null: "Expected another type but found null instead."
    case .bool: "Expected another type but found a boolean instead."
    case .number: "Expected another type but found a number instead."
    case .string: "Expected another type but found a string instead."
    case .array: "Expected another type but found an array instead."
    case .object: "Expected another type but found an object instead."
    }
    return DecodingError.typeMismatch(type, .init(codingPath: codingPath, debugDescription: description))
}
