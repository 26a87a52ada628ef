import Foundation

extension EntitlementsDocument {
    /// The document as JSON, written by hand: byte for byte what `JSONEncoder` with `.sortedKeys` and
    /// `.withoutEscapingSlashes` makes of ``encode(to:)`` (keys in the order of their UTF-8 bytes, strings escaped
    /// as it escapes them, non-ASCII as is), at a fraction of its cost. It opens with `{"as_of":"` and the
    /// timestamp, as the sorted keys put it first.
    public var jsonBytes: [UInt8] {
        var json = JSONBytes()
        json.bytes.reserveCapacity(160 + 240 * entitlements.count + 40 * consumables.count)
        json.open()
        json.key("as_of")
        json.date(asOf)
        json.key("consumables")
        json.object(consumables) { $0.int($1) }
        json.key("entitlements")
        json.object(entitlements) { $0.entitlement($1) }
        json.key("unknown_products")
        json.bytes.append(UInt8(ascii: "["))
        for (position, product) in unknownProducts.enumerated() {
            if position > 0 { json.bytes.append(UInt8(ascii: ",")) }
            json.string(product)
        }
        json.bytes.append(UInt8(ascii: "]"))
        json.key("user_id")
        json.string(userID)
        json.close()
        return json.bytes
    }
}

/// A JSON object being written into bytes, as `JSONEncoder` (no pretty printing, slashes unescaped) writes it.
struct JSONBytes {
    var bytes: [UInt8] = []
    /// Whether the innermost open object has no member yet.
    private var atFirstMember = false

    /// `dictionary` as an object, its members in `JSONEncoder`'s `.sortedKeys` order on Linux (by the keys'
    /// UTF-8 bytes), each value written by `value`.
    mutating func object<Value>(_ dictionary: [String: Value], _ value: (inout JSONBytes, Value) -> Void) {
        open()
        for member in dictionary.sorted(by: { $0.key.utf8.lexicographicallyPrecedes($1.key.utf8) }) {
            key(string: member.key)
            value(&self, member.value)
        }
        close()
    }

    mutating func open() {
        bytes.append(UInt8(ascii: "{"))
        atFirstMember = true
    }

    mutating func close() {
        bytes.append(UInt8(ascii: "}"))
        atFirstMember = false
    }

    /// A member's key (after a comma unless it is the object's first), and the colon.
    mutating func key(string name: String) {
        if !atFirstMember { bytes.append(UInt8(ascii: ",")) }
        atFirstMember = false
        string(name)
        bytes.append(UInt8(ascii: ":"))
    }

    /// A member's key spelled in the source, which needs no escape (plain ASCII letters and underscores).
    mutating func key(_ name: StaticString) {
        if !atFirstMember { bytes.append(UInt8(ascii: ",")) }
        atFirstMember = false
        bytes.append(UInt8(ascii: "\""))
        name.withUTF8Buffer { bytes.append(contentsOf: $0) }
        bytes.append(UInt8(ascii: "\""))
        bytes.append(UInt8(ascii: ":"))
    }

    mutating func bool(_ value: Bool) {
        bytes.append(contentsOf: value ? "true".utf8 : "false".utf8)
    }

    mutating func int(_ value: Int) {
        if value < 0 { bytes.append(UInt8(ascii: "-")) }
        var magnitude = value.magnitude
        var scratch: (UInt64, UInt64, UInt64) = (0, 0, 0)  // room for the 20 digits of UInt64.max
        withUnsafeMutableBytes(of: &scratch) { digits in
            var index = digits.count
            repeat {
                index -= 1
                digits[index] = UInt8(truncatingIfNeeded: magnitude % 10) + UInt8(ascii: "0")
                magnitude /= 10
            } while magnitude > 0
            bytes.append(contentsOf: digits[index...])
        }
    }

    /// `date` as the model encodes every date: an RFC 3339 string in whole seconds.
    mutating func date(_ date: Date) {
        bytes.append(UInt8(ascii: "\""))
        RFC3339.append(date, to: &bytes)
        bytes.append(UInt8(ascii: "\""))
    }

    /// `value` quoted, with `"` and `\` escaped, `\b \f \n \r \t` for those controls, `\u00XX` (lower-case hex)
    /// for the other controls below 0x20; everything else, `/` and non-ASCII included, as its UTF-8 bytes.
    mutating func string(_ value: String) {
        bytes.append(UInt8(ascii: "\""))
        var value = value
        value.withUTF8 { utf8 in
            guard utf8.contains(where: { $0 < 0x20 || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") }) else {
                bytes.append(contentsOf: utf8)
                return
            }
            var plain = 0  // the start of the run of bytes that need no escape
            for (index, byte) in utf8.enumerated() where byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") {
                bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[plain..<index]))
                plain = index + 1
                bytes.append(UInt8(ascii: "\\"))
                switch byte {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"): bytes.append(byte)
                case 0x08: bytes.append(UInt8(ascii: "b"))
                case 0x0C: bytes.append(UInt8(ascii: "f"))
                case 0x0A: bytes.append(UInt8(ascii: "n"))
                case 0x0D: bytes.append(UInt8(ascii: "r"))
                case 0x09: bytes.append(UInt8(ascii: "t"))
                default:
                    let low = byte & 0xF
                    bytes.append(contentsOf: "u00".utf8)
                    bytes.append(UInt8(ascii: "0") + byte >> 4)
                    bytes.append(low < 10 ? UInt8(ascii: "0") + low : UInt8(ascii: "a") + low - 10)
                }
            }
            bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[plain...]))
        }
        bytes.append(UInt8(ascii: "\""))
    }

    /// One value of the `entitlements` object, members in sorted order (see ``Entitlement/encode(to:)``).
    mutating func entitlement(_ entitlement: Entitlement) {
        open()
        key("active")
        bool(entitlement.active)
        switch entitlement.source {
        case .appStore(let purchase):
            key("environment")
            string(purchase.environment.rawValue)
            expiry(entitlement.expiresAt)
            key("in_billing_retry")
            bool(purchase.inBillingRetry)
            key("in_grace_period")
            bool(purchase.inGracePeriod)
            inactiveReason(entitlement.inactiveReason)
            key("original_transaction_id")
            string(purchase.originalTransactionID)
            key("ownership")
            string(purchase.ownership.rawValue)
            key("product_id")
            string(purchase.productID)
            key("product_type")
            string(purchase.productType.rawValue)
            key("source")
            string("app_store")
            key("will_renew")
            bool(purchase.willRenew)
        case .grant(let id, let reason):
            expiry(entitlement.expiresAt)
            key("grant_id")
            string(id)
            inactiveReason(entitlement.inactiveReason)
            key("reason")
            string(reason)
            key("source")
            string("grant")
        }
        close()
    }

    private mutating func expiry(_ expiresAt: Date?) {
        key("expires_at")
        if let expiresAt { date(expiresAt) } else { bytes.append(contentsOf: "null".utf8) }
    }

    private mutating func inactiveReason(_ reason: InactiveReason?) {
        guard let reason else { return }
        key("inactive_reason")
        string(reason.rawValue)
    }
}
