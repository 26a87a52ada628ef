/// One element of BER (ITU-T X.690), the encoding of App Store receipts, read from untrusted bytes.
///
/// App receipts are DER except where Xcode writes them with indefinite lengths and their content in a
/// constructed OCTET STRING of segments; both forms are read. Every length is checked against the bytes
/// there are, nesting is bounded (`maxDepth`), and nothing is trusted to be well formed: a malformed input
/// throws ``BERError``, never traps.
struct BERNode: Sendable {
    enum TagClass: UInt8, Sendable {
        case universal, application, contextSpecific, `private`
    }

    /// Universal tag numbers the receipt decoders read.
    enum Universal {
        static let integer: UInt32 = 2
        static let octetString: UInt32 = 4
        static let objectIdentifier: UInt32 = 6
        static let utf8String: UInt32 = 12
        static let sequence: UInt32 = 16
        static let set: UInt32 = 17
        static let printableString: UInt32 = 19
        static let ia5String: UInt32 = 22
    }

    /// How deep constructed elements may nest (a receipt needs 8; the bound keeps recursion off untrusted depth).
    static let maxDepth = 32

    var tagClass: TagClass
    var tagNumber: UInt32
    var isConstructed: Bool
    /// A primitive element's content octets (empty for a constructed one).
    var content: ArraySlice<UInt8>
    /// A constructed element's elements, in order.
    var children: [BERNode]
    /// The whole element as it was encoded: identifier, length, content (and end-of-contents).
    var encoded: ArraySlice<UInt8>

    /// Reads `bytes` as exactly one element.
    init(_ bytes: ArraySlice<UInt8>) throws(BERError) {
        var index = bytes.startIndex
        self = try Self.element(bytes, at: &index, depth: 0)
        guard index == bytes.endIndex else { throw BERError("\(bytes.endIndex - index) bytes follow the element") }
    }

    private init(tagClass: TagClass, tagNumber: UInt32, isConstructed: Bool, content: ArraySlice<UInt8>,
                 children: [BERNode], encoded: ArraySlice<UInt8>) {
        self.tagClass = tagClass
        self.tagNumber = tagNumber
        self.isConstructed = isConstructed
        self.content = content
        self.children = children
        self.encoded = encoded
    }

    /// True when this is the universal element `tag`.
    func isUniversal(_ tag: UInt32) -> Bool { tagClass == .universal && tagNumber == tag }

    /// True when this is the context-specific element `[tag]`.
    func isContext(_ tag: UInt32) -> Bool { tagClass == .contextSpecific && tagNumber == tag }

    /// An OCTET STRING's octets: the content of a primitive one, the segments of a constructed one joined.
    func octets() throws(BERError) -> [UInt8] {
        guard isUniversal(Universal.octetString) else { throw BERError("expected an OCTET STRING") }
        guard isConstructed else { return Array(content) }
        var joined: [UInt8] = []
        for segment in children { joined += try segment.octets() }
        return joined
    }

    /// A primitive INTEGER that fits in an `Int` (two's complement, at most eight octets).
    func integer() throws(BERError) -> Int {
        guard isUniversal(Universal.integer), !isConstructed, (1...8).contains(content.count) else {
            throw BERError("expected an INTEGER of at most 64 bits")
        }
        var value = Int(Int8(bitPattern: content[content.startIndex]))
        for byte in content.dropFirst() { value = value << 8 | Int(byte) }
        return value
    }

    /// A primitive UTF8String, IA5String or PrintableString as text (valid UTF-8 required).
    func text() throws(BERError) -> String {
        let tags = [Universal.utf8String, Universal.ia5String, Universal.printableString]
        guard tagClass == .universal, tags.contains(tagNumber), !isConstructed else { throw BERError("expected a string") }
        guard let text = String(validating: content, as: UTF8.self) else { throw BERError("a string is not UTF-8") }
        return text
    }

    /// The element at `index` of a constructed element.
    func child(_ index: Int) throws(BERError) -> BERNode {
        guard isConstructed, children.indices.contains(index) else { throw BERError("expected element \(index + 1) of a constructed element") }
        return children[index]
    }

    /// Reads the element starting at `index` and moves `index` past it.
    private static func element(_ bytes: ArraySlice<UInt8>, at index: inout Int, depth: Int) throws(BERError) -> BERNode {
        guard depth < maxDepth else { throw BERError("elements nest deeper than \(maxDepth)") }
        let start = index
        let identifier = try byte(bytes, at: &index)
        let tagClass = TagClass(rawValue: identifier >> 6)!  // two bits: always one of the four
        let constructed = identifier & 0x20 != 0
        var tagNumber = UInt32(identifier & 0x1f)
        if tagNumber == 0x1f {  // high tag number form: base 128, most significant first
            tagNumber = 0
            for position in 0... {
                guard position < 4 else { throw BERError("a tag number longer than four octets") }
                let octet = try byte(bytes, at: &index)
                tagNumber = tagNumber << 7 | UInt32(octet & 0x7f)
                if octet & 0x80 == 0 { break }
            }
        }
        let lengthOctet = try byte(bytes, at: &index)
        if lengthOctet == 0x80 {  // indefinite: elements up to an end-of-contents (two zero octets)
            guard constructed else { throw BERError("an indefinite length on a primitive element") }
            var children: [BERNode] = []
            while true {
                guard bytes.endIndex - index >= 2 else { throw BERError("an indefinite-length element has no end") }
                if bytes[index] == 0, bytes[index + 1] == 0 { index += 2; break }
                children.append(try element(bytes, at: &index, depth: depth + 1))
            }
            return BERNode(tagClass: tagClass, tagNumber: tagNumber, isConstructed: true, content: bytes[index..<index],
                           children: children, encoded: bytes[start..<index])
        }
        var length = Int(lengthOctet)
        if lengthOctet & 0x80 != 0 {
            let count = Int(lengthOctet & 0x7f)
            guard count <= 4 else { throw BERError("a length of \(count) octets") }
            length = 0
            for _ in 0..<count { length = length << 8 | Int(try byte(bytes, at: &index)) }
        }
        guard length <= bytes.endIndex - index else {
            throw BERError("an element of \(length) octets with \(bytes.endIndex - index) left")
        }
        let content = bytes[index..<(index + length)]
        index += length
        guard constructed else {
            return BERNode(tagClass: tagClass, tagNumber: tagNumber, isConstructed: false, content: content,
                           children: [], encoded: bytes[start..<index])
        }
        var children: [BERNode] = []
        var inner = content.startIndex
        while inner < content.endIndex { children.append(try element(content, at: &inner, depth: depth + 1)) }
        return BERNode(tagClass: tagClass, tagNumber: tagNumber, isConstructed: true, content: content[inner..<inner],
                       children: children, encoded: bytes[start..<index])
    }

    private static func byte(_ bytes: ArraySlice<UInt8>, at index: inout Int) throws(BERError) -> UInt8 {
        guard index < bytes.endIndex else { throw BERError("the data ends inside an element") }
        defer { index += 1 }
        return bytes[index]
    }
}

/// Why bytes are not the BER a receipt decoder expected.
struct BERError: Error, Sendable, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
