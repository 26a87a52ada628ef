import Foundation

/// A compact JWS (`header.payload.signature`) split and decoded, not yet verified, read as strictly as Apple's
/// library reads it: three canonical base64url segments, a header and a payload that are JSON objects.
struct SignedJWS {
    /// The header's fields that matter.
    var header: Header
    /// The decoded payload.
    var payload: [UInt8]
    /// The bytes the signature covers: the header and payload segments as sent, joined by a dot.
    var signingInput: ArraySlice<UInt8>
    /// The decoded signature (raw `r || s` for ES256).
    var signature: [UInt8]

    /// What the header says: other fields (`typ`…) are ignored, as Apple's library ignores them.
    struct Header: Sendable {
        /// `alg`, when it is a string.
        var algorithm: String?
        /// How many certificates `x5c` lists; nil when it is absent or not a list of strings.
        var chainLength: Int?
        /// The DER of x5c[0] (the leaf) and x5c[1] (the intermediate), each nil when it is not strict
        /// standard base64. x5c[2] is never decoded.
        var leafDER: [UInt8]?
        var intermediateDER: [UInt8]?
        /// Why the header's other parameters refuse the JWS, as PyJWT refuses it; nil when they do not.
        var parameterProblem: String?

        /// Decodes and parses the header segment `segment` (base64url of a JSON object).
        init(segment: ArraySlice<UInt8>) throws(SignedDataError) {
            guard let json = StrictBase64.decode(segment, .url) else {
                throw SignedDataError(.verificationFailure, "the JWS header is not canonical base64url")
            }
            guard case .object(let fields)? = try? JSONTree.parse(json) else {
                throw SignedDataError(.verificationFailure, "the JWS header is not a JSON object")
            }
            if case .string(let alg)? = fields["alg"] { algorithm = alg }
            if case .array(let entries)? = fields["x5c"] {
                let texts = entries.compactMap { if case .string(let entry) = $0 { entry } else { nil } }
                if texts.count == entries.count {
                    chainLength = texts.count
                    leafDER = texts.first.flatMap { StrictBase64.decode($0.utf8, .standard) }
                    intermediateDER = texts.dropFirst().first.flatMap { StrictBase64.decode($0.utf8, .standard) }
                }
            }
            parameterProblem = Self.parameterProblem(fields)
        }

        /// `crit` lists extensions the recipient must understand, and we know none; a `kid` must be a string;
        /// `b64` false announces a detached payload, which App Store data never has.
        private static func parameterProblem(_ fields: JSONObject) -> String? {
            if fields["crit"] != nil { return "the JWS header has crit, and no extension is supported" }
            switch fields["kid"] {
            case nil, .string?: break
            default: return "the JWS header's kid is not a string"
            }
            if case .bool(false)? = fields["b64"] { return "the JWS header's b64 is false (a detached payload)" }
            return nil
        }
    }

    /// Splits and decodes `text`, its header through `headers`; throws a `verificationFailure` when it is not a
    /// well-formed JWS.
    init(_ text: String, headers: JWSHeaderCache) throws(SignedDataError) {
        let bytes = Array(text.utf8)
        let dots = bytes.withUnsafeBytes { buffer in
            // memchr: these texts are kilobytes long, and a byte loop here would show in a cached verification.
            var dots: [Int] = []
            var from = 0
            while dots.count < 3, from < buffer.count, let found = memchr(buffer.baseAddress! + from, 0x2E, buffer.count - from) {
                dots.append(buffer.baseAddress!.distance(to: UnsafeRawPointer(found)))
                from = dots[dots.count - 1] + 1
            }
            return dots
        }
        guard dots.count == 2 else {
            throw SignedDataError(.verificationFailure, "not a compact JWS of three dot-separated segments")
        }
        let (first, second) = (dots[0], dots[1])
        guard let payload = StrictBase64.decode(bytes[(first + 1)..<second], .url) else {
            throw SignedDataError(.verificationFailure, "the JWS payload is not canonical base64url")
        }
        guard let signature = StrictBase64.decode(bytes[(second + 1)...], .url) else {
            throw SignedDataError(.verificationFailure, "the JWS signature is not canonical base64url")
        }
        header = try headers.header(bytes[..<first])
        self.payload = payload
        signingInput = bytes[..<second]
        self.signature = signature
    }
}
