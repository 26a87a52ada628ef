import Foundation

/// A JSON Web Signature in compact serialization (`header.payload.signature`, each part base64url), split and
/// decoded but not verified: the App Store signs notifications, transactions and renewal info this way.
public struct CompactJWS: Sendable, Hashable {
    /// The header's `alg` (`ES256` for everything the App Store signs).
    public var algorithm: String?
    /// The header's `kid` (the key id of an App Store Server API token).
    public var keyID: String?
    /// The header's `typ` (`JWT` on App Store Server API tokens).
    public var type: String?
    /// The header's `x5c`: the DER certificates of the signing chain, leaf first; empty when absent.
    public var certificateChain: [[UInt8]]
    /// The decoded payload (JSON for the App Store).
    public var payload: Data
    /// The bytes the signature covers: the header and payload parts as sent, joined by a dot.
    public var signingInput: [UInt8]
    /// The decoded signature (raw `r || s` for ES256).
    public var signature: Data

    /// Splits and decodes `text`; throws when it is not three base64url parts with a JSON object header.
    public init(_ text: String) throws(CompactJWSError) {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3 else { throw CompactJWSError("expected three dot-separated parts, found \(parts.count)") }
        guard let headerBytes = Self.base64URLDecoded(parts[0]),
              let header = try? JSONSerialization.jsonObject(with: headerBytes) as? [String: Any] else {
            throw CompactJWSError("the header is not base64url-encoded JSON")
        }
        guard let payload = Self.base64URLDecoded(parts[1]) else { throw CompactJWSError("the payload is not base64url") }
        guard let signature = Self.base64URLDecoded(parts[2]) else { throw CompactJWSError("the signature is not base64url") }
        var chain: [[UInt8]] = []
        if let x5c = header["x5c"] {
            guard let entries = x5c as? [String] else { throw CompactJWSError("x5c is not a list of strings") }
            for (index, entry) in entries.enumerated() {
                guard let der = Data(base64Encoded: entry) else { throw CompactJWSError("x5c[\(index)] is not base64") }
                chain.append(Array(der))
            }
        }
        algorithm = header["alg"] as? String
        keyID = header["kid"] as? String
        type = header["typ"] as? String
        certificateChain = chain
        self.payload = payload
        signingInput = Array(text.utf8.prefix(parts[0].utf8.count + 1 + parts[1].utf8.count))
        self.signature = signature
    }

    /// Encodes `bytes` as base64url without padding (RFC 7515 §2).
    public static func base64URL(_ bytes: some Sequence<UInt8>) -> String {
        var text = Data(bytes).base64EncodedString()
        while text.last == "=" { text.removeLast() }
        return String(text.map { $0 == "+" ? "-" : $0 == "/" ? "_" : $0 })
    }

    /// Decodes base64url without padding (RFC 7515 §2); nil when `part` holds other characters.
    static func base64URLDecoded(_ part: Substring) -> Data? {
        var text = part.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        text += String(repeating: "=", count: (4 - text.utf8.count % 4) % 4)
        return Data(base64Encoded: text)
    }
}

/// Why a text is not a compact JWS.
public struct CompactJWSError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What is wrong with it.
    public var reason: String
    public var description: String { "malformed JWS: \(reason)" }

    init(_ reason: String) { self.reason = reason }
}
