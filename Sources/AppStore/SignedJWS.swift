import Foundation

/// A compact JWS (`header.payload.signature`) split and decoded, not yet verified, read as strictly as Apple's
/// library reads it: three canonical base64url segments, a header and a payload that are JSON objects.
struct SignedJWS {
    /// The header's `alg`, when it is a string.
    var algorithm: String?
    /// The header's `x5c` (standard base64 DER, leaf first), when it is a list of strings.
    var certificateChain: [String]?
    /// Whether the header has `crit`: it lists extensions the recipient must understand, and we know none.
    var hasCriticalParameters: Bool
    /// The decoded payload.
    var payload: Data
    /// The bytes the signature covers: the header and payload segments as sent, joined by a dot.
    var signingInput: ArraySlice<UInt8>
    /// The decoded signature (raw `r || s` for ES256).
    var signature: [UInt8]

    /// Splits and decodes `text`; throws a `verificationFailure` when it is not a well-formed JWS.
    init(_ text: String) throws(SignedDataError) {
        let bytes = Array(text.utf8)
        let dots = bytes.indices.filter { bytes[$0] == UInt8(ascii: ".") }
        guard dots.count == 2 else {
            throw SignedDataError(.verificationFailure, "not a compact JWS: \(dots.count + 1) dot-separated segment(s), expected 3")
        }
        guard let header = StrictBase64.decode(bytes[..<dots[0]], .url) else {
            throw SignedDataError(.verificationFailure, "the JWS header is not canonical base64url")
        }
        guard let payload = StrictBase64.decode(bytes[(dots[0] + 1)..<dots[1]], .url) else {
            throw SignedDataError(.verificationFailure, "the JWS payload is not canonical base64url")
        }
        guard let signature = StrictBase64.decode(bytes[(dots[1] + 1)...], .url) else {
            throw SignedDataError(.verificationFailure, "the JWS signature is not canonical base64url")
        }
        let fields: Header
        do {
            fields = try JSONDecoder().decode(Header.self, from: Data(header))
        } catch {
            throw SignedDataError(.verificationFailure, "the JWS header is not a JSON object")
        }
        algorithm = fields.alg
        certificateChain = fields.x5c
        hasCriticalParameters = fields.hasCrit
        self.payload = Data(payload)
        signingInput = bytes[..<dots[1]]
        self.signature = signature
    }

    /// The header fields that matter; others (`typ`, `kid`…) are ignored, as Apple's library ignores them.
    private struct Header: Decodable {
        var alg: String?
        var x5c: [String]?
        var hasCrit: Bool

        private enum CodingKeys: String, CodingKey { case alg, x5c, crit }

        init(from decoder: any Decoder) throws {
            let header = try decoder.container(keyedBy: CodingKeys.self)
            alg = try? header.decode(String.self, forKey: .alg)
            x5c = try? header.decode([String].self, forKey: .x5c)
            hasCrit = header.contains(.crit)
        }
    }
}
