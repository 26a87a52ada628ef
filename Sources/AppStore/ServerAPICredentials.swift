import Crypto
import EntitlementModel
import Foundation

/// The App Store Connect in-app purchase key (`APPLE_ISSUER_ID`, `APPLE_KEY_ID`, `APPLE_PRIVATE_KEY_FILE`) and
/// the app it speaks for: what mints the ES256 token of each App Store Server API request.
///
/// The private key is never printed: the description names the key id and the issuer only.
public struct ServerAPICredentials: Sendable, CustomStringConvertible {
    /// `APPLE_ISSUER_ID`: the App Store Connect issuer id, the token's `iss`.
    public var issuerID: String
    /// `APPLE_KEY_ID`: the in-app purchase key's id, the token's `kid`.
    public var keyID: String
    /// `APPLE_BUNDLE_ID`: the app's bundle id, the token's `bid`.
    public var bundleID: String
    let privateKey: P256.Signing.PrivateKey

    /// How long a minted token is valid: 5 minutes, well under Apple's 60.
    public static let tokenLifetime: TimeInterval = 300

    /// Credentials from values already read; nothing is checked until Apple answers (401 for a wrong id or key).
    public init(issuerID: String, keyID: String, bundleID: String, privateKey: P256.Signing.PrivateKey) {
        self.issuerID = issuerID
        self.keyID = keyID
        self.bundleID = bundleID
        self.privateKey = privateKey
    }

    /// Reads the `.p8` file at `path` (PEM, PKCS#8, P-256). The error names the file and what is wrong,
    /// never its contents.
    public static func privateKey(pemFile path: String) throws(ServerAPIKeyError) -> P256.Signing.PrivateKey {
        let named = shown(path)
        guard let data = FileManager.default.contents(atPath: path) else {
            throw ServerAPIKeyError("\(named), which cannot be read")
        }
        guard let text = String(data: data, encoding: .utf8), text.contains("-----BEGIN") else {
            throw ServerAPIKeyError("\(named), which is not a PEM file (expected the .p8 key from App Store Connect)")
        }
        do {
            return try P256.Signing.PrivateKey(pemRepresentation: text)
        } catch {
            throw ServerAPIKeyError("\(named), which does not hold a P-256 private key (PKCS#8 PEM)")
        }
    }

    /// `path` quoted, when it looks like a file path (absolute or relative to `.`, no whitespace, none of PEM's
    /// dashes or base64's `+` and `=`); else a note that it is not shown: a setting holding the key itself (its PEM
    /// or its base64) instead of the file's path is never echoed.
    static func shown(_ path: String) -> String {
        let pathLike = (path.hasPrefix("/") || path.hasPrefix(".")) && !path.contains("-----")
            && !path.unicodeScalars.contains { $0.properties.isWhitespace || $0 == "+" || $0 == "=" }
        return pathLike ? "'\(path)'" : "named by a value not shown (it does not look like a file path: the setting names the .p8 file, it does not hold the key)"
    }

    /// A fresh token for a request at `now`: `ServerAPIToken` signed with the key (ES256, raw `r || s`).
    public func token(now: Date = Date(), lifetime: TimeInterval = Self.tokenLifetime) -> String {
        let input = ServerAPIToken(keyID: keyID, issuerID: issuerID, bundleID: bundleID, now: now, lifetime: lifetime).signingInput
        // Signing with a valid P-256 key cannot fail.
        let signature = try! privateKey.signature(for: Data(input.utf8))
        return input + "." + CompactJWS.base64URL(signature.rawRepresentation)
    }

    public var description: String { "App Store Server API key \(keyID) of issuer \(issuerID) for \(bundleID)" }
}

/// Why the `.p8` key could not be loaded; names the file, never the key.
public struct ServerAPIKeyError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The file and what is wrong with it: `'/path/key.p8', which cannot be read`.
    public var reason: String
    public var description: String { "the key file \(reason)" }

    init(_ reason: String) { self.reason = reason }
}
