import Crypto
import Foundation
import ServiceRuntime

/// Signs webhook requests as the Standard Webhooks specification says: `webhook-signature` is `v1,` and the
/// base64 of HMAC-SHA256, keyed with the secret's decoded bytes, over `<webhook-id>.<webhook-timestamp>.<body>`.
///
/// The secret is `whsec_` and the base64 of 24 to 64 bytes; it is never logged, and an error about it never
/// quotes it.
struct WebhookSigner: Sendable {
    private let key: SymmetricKey

    /// Reads a `whsec_` secret (padding optional, as the specification's libraries accept it).
    /// - Throws: a problem naming `variable`, without the value.
    init(secret: String, variable: String = "WEBHOOK_SECRET") throws(ConfigurationError) {
        let prefix = "whsec_"
        guard secret.hasPrefix(prefix) else {
            throw ConfigurationError(variable: variable, problem: "must start with whsec_ (a Standard Webhooks secret)")
        }
        var base64 = String(secret.dropFirst(prefix.count))
        base64 += String(repeating: "=", count: (4 - base64.utf8.count % 4) % 4)
        guard let bytes = Data(base64Encoded: base64) else {
            throw ConfigurationError(variable: variable, problem: "must be whsec_ followed by base64")
        }
        guard (24...64).contains(bytes.count) else {
            throw ConfigurationError(variable: variable, problem: "must hold 24 to 64 bytes after whsec_ (it holds \(bytes.count))")
        }
        key = SymmetricKey(data: bytes)
    }

    /// The `webhook-signature` value for one request.
    func signature(id: String, timestamp: Int, body: [UInt8]) -> String {
        var hmac = HMAC<SHA256>(key: key)
        hmac.update(data: Array("\(id).\(timestamp).".utf8))
        hmac.update(data: body)
        return "v1," + Data(hmac.finalize()).base64EncodedString()
    }

    /// The three Standard Webhooks headers and the content type of one request.
    func headers(id: String, timestamp: Int, body: [UInt8]) -> [(String, String)] {
        [
            ("Content-Type", "application/json"),
            ("webhook-id", id),
            ("webhook-timestamp", String(timestamp)),
            ("webhook-signature", signature(id: id, timestamp: timestamp, body: body)),
        ]
    }
}
