/// The header fields of a request or response: kept in arrival order, looked up case-insensitively.
///
/// Names are stored as they were received or set; lookups compare ASCII case-insensitively, as HTTP field
/// names are case-insensitive. A name may occur more than once (`values(for:)` returns every occurrence).
public struct HTTPHeaders: Sendable, Equatable, Sequence, ExpressibleByDictionaryLiteral {
    private var fields: [(name: String, value: String)] = []

    /// No fields; nothing is allocated until the first `add`.
    public init() {}

    /// Empty, with room for `capacity` fields: one allocation for the usual handful, not one per growth.
    public init(capacity: Int) {
        fields.reserveCapacity(capacity)
    }

    /// The fields in literal order, added with `add`: a repeated name is kept twice.
    public init(dictionaryLiteral elements: (String, String)...) {
        for (name, value) in elements { add(name, value) }
    }

    /// The number of fields, counting repeated names once per occurrence.
    public var count: Int { fields.count }

    /// The first value of `name`, or nil.
    public subscript(name: String) -> String? {
        fields.first { Self.sameName($0.name, name) }?.value
    }

    /// The value of `name` when the field occurs exactly once; nil when it is absent or repeated.
    public func sole(_ name: String) -> String? {
        var found: String?
        for field in fields where Self.sameName(field.name, name) {
            if found != nil { return nil }
            found = field.value
        }
        return found
    }

    /// Every value of `name`, in order.
    public func values(for name: String) -> [String] {
        fields.filter { Self.sameName($0.name, name) }.map(\.value)
    }

    /// True when at least one field is called `name`.
    public func contains(_ name: String) -> Bool {
        fields.contains { Self.sameName($0.name, name) }
    }

    /// Appends a field, keeping any earlier ones with the same name.
    public mutating func add(_ name: String, _ value: String) {
        fields.append((name, value))
    }

    /// Replaces every field called `name` with a single one.
    public mutating func set(_ name: String, _ value: String) {
        if contains(name) { remove(name) }
        add(name, value)
    }

    /// Removes every field called `name`.
    public mutating func remove(_ name: String) {
        fields.removeAll { Self.sameName($0.name, name) }
    }

    /// The fields in order, names as received or set, a repeated name once per occurrence.
    public func makeIterator() -> IndexingIterator<[(name: String, value: String)]> {
        fields.makeIterator()
    }

    /// Calls `body` with each field in order, read in place: unlike iterating, no field is copied (each
    /// copy would retain its name and value).
    func forEachField(_ body: (_ name: String, _ value: String) -> Void) {
        fields.withUnsafeBufferPointer { fields in
            for index in fields.indices { body(fields[index].name, fields[index].value) }
        }
    }

    public static func == (a: HTTPHeaders, b: HTTPHeaders) -> Bool {
        a.fields.elementsEqual(b.fields) { $0.name == $1.name && $0.value == $1.value }
    }

    /// ASCII case-insensitive comparison of two field names.
    static func sameName(_ a: String, _ b: String) -> Bool {
        guard a.utf8.count == b.utf8.count else { return false }
        var left = a.utf8.makeIterator()
        var right = b.utf8.makeIterator()
        while true {
            switch (left.next(), right.next()) {
            case (nil, nil): return true
            case let (x?, y?):
                if x != y && lowercased(x) != lowercased(y) { return false }
            default: return false
            }
        }
    }

    private static func lowercased(_ byte: UInt8) -> UInt8 {
        byte >= 0x41 && byte <= 0x5A ? byte | 0x20 : byte
    }
}
