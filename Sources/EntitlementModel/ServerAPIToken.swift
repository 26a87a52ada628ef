import Foundation

/// The JSON Web Token that authorizes one App Store Server API request: the header
/// `{"alg":"ES256","kid":<key id>,"typ":"JWT"}` and the claims `iss` (issuer id), `iat`, `exp` (at most 60
/// minutes after it), `aud` `appstoreconnect-v1` and `bid` (bundle id). Pure: the caller signs
/// `signingInput` with the `.p8` key (ES256) and appends the signature; the fake App Store reads a token
/// back with `init(_:)` and checks it with `refusal(now:…)`.
public struct ServerAPIToken: Sendable, Hashable {
    /// The `aud` Apple requires.
    public static let audience = "appstoreconnect-v1"
    /// The longest time from `iat` (or now) to `exp` that Apple accepts.
    public static let longestLifetime: TimeInterval = 3_600

    /// The header's `kid`: the App Store Connect key id.
    public var keyID: String
    /// `iss`: the App Store Connect issuer id of the key.
    public var issuerID: String
    /// `bid`: the bundle id of the app the requests are for.
    public var bundleID: String
    /// `iat`; Apple's own library sends none, so a token read back may lack it.
    public var issuedAt: Date?
    /// `exp` (seconds since 1970, whole when minted); required.
    public var expiresAt: Date
    /// `aud`; Apple accepts only ``audience`` (`appstoreconnect-v1`).
    public var audience: String
    /// The header's `alg` and `typ` as read (written as `ES256` and `JWT`).
    public var algorithm: String?
    /// The header's `typ` as read (nil when absent); `JWT` when minted.
    public var type: String?

    /// A token issued at `now` (whole seconds) and valid for `lifetime` seconds.
    public init(keyID: String, issuerID: String, bundleID: String, now: Date, lifetime: TimeInterval) {
        let issued = now.timeIntervalSince1970.rounded(.down)
        self.keyID = keyID
        self.issuerID = issuerID
        self.bundleID = bundleID
        issuedAt = Date(timeIntervalSince1970: issued)
        expiresAt = Date(timeIntervalSince1970: issued + lifetime.rounded(.down))
        audience = Self.audience
        algorithm = "ES256"
        type = "JWT"
    }

    /// The header and claims of `jws`, a token as received; nothing is verified. Throws when a claim is
    /// missing or of the wrong type.
    public init(_ jws: CompactJWS) throws(ServerAPITokenError) {
        guard let claims = try? JSONSerialization.jsonObject(with: jws.payload) as? [String: Any] else {
            throw ServerAPITokenError("the claims are not a JSON object")
        }
        func text(_ name: String) throws(ServerAPITokenError) -> String {
            guard let value = claims[name] as? String, !value.isEmpty else { throw ServerAPITokenError("the claim '\(name)' is missing or not a string") }
            return value
        }
        func seconds(_ name: String) throws(ServerAPITokenError) -> Date? {
            guard let value = claims[name] else { return nil }
            guard !(value is String), let number = value as? Double else {
                throw ServerAPITokenError("the claim '\(name)' is not a number of seconds")
            }
            return Date(timeIntervalSince1970: number)
        }
        guard let keyID = jws.keyID, !keyID.isEmpty else { throw ServerAPITokenError("the header has no 'kid'") }
        self.keyID = keyID
        issuerID = try text("iss")
        bundleID = try text("bid")
        audience = try text("aud")
        issuedAt = try seconds("iat")
        guard let expires = try seconds("exp") else { throw ServerAPITokenError("the claim 'exp' is missing") }
        expiresAt = expires
        algorithm = jws.algorithm
        type = jws.type
    }

    /// The part the signature covers when this token is minted: base64url of the header and of the claims
    /// (compact JSON, keys sorted), joined by a dot. A received token's signature covers the text as
    /// received (`CompactJWS.signingInput`), not this.
    public var signingInput: String {
        CompactJWS.base64URL(Self.json(Header(alg: algorithm ?? "ES256", kid: keyID, typ: type ?? "JWT")))
            + "." + CompactJWS.base64URL(Self.json(Claims(
                aud: audience, bid: bundleID, exp: Int64(expiresAt.timeIntervalSince1970),
                iat: issuedAt.map { Int64($0.timeIntervalSince1970) }, iss: issuerID)))
    }

    /// Why Apple would refuse these header and claims at `now`, or nil when it would not: `alg` must be
    /// ES256, `aud` Apple's, `bid` the app's, `iss` and `kid` the key's (when given); `exp` in the future and
    /// at most 60 minutes after `iat` (after `now` for a token without `iat`); `iat` not in the future.
    /// `leeway` seconds of clock skew are forgiven.
    public func refusal(now: Date, bundleID: String, issuerID: String?, keyID: String?, leeway: TimeInterval = 60) -> String? {
        if algorithm != "ES256" { return "alg is \(algorithm.map { "'\($0)'" } ?? "missing"), expected ES256" }
        if let keyID, self.keyID != keyID { return "kid '\(self.keyID)' is not the key's id" }
        if let issuerID, self.issuerID != issuerID { return "iss '\(self.issuerID)' is not the key's issuer" }
        if audience != Self.audience { return "aud '\(audience)' is not '\(Self.audience)'" }
        if self.bundleID != bundleID { return "bid '\(self.bundleID)' is not the app's bundle id" }
        if expiresAt.addingTimeInterval(leeway) <= now { return "the token expired" }
        if let issuedAt, issuedAt > now.addingTimeInterval(leeway) { return "iat is in the future" }
        if expiresAt.timeIntervalSince(issuedAt ?? now) > Self.longestLifetime + leeway {
            return "exp is more than 60 minutes after \(issuedAt == nil ? "now" : "iat")"
        }
        return nil
    }

    private struct Header: Encodable { var alg: String, kid: String, typ: String }
    private struct Claims: Encodable { var aud: String, bid: String, exp: Int64, iat: Int64?, iss: String }

    private static func json(_ value: some Encodable) -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        // Strings and integers always encode.
        return try! encoder.encode(value)
    }
}

/// Why a token could not be read.
public struct ServerAPITokenError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What is wrong, e.g. `the header has no 'kid'`.
    public var reason: String
    public var description: String { "malformed App Store Server API token: \(reason)" }

    init(_ reason: String) { self.reason = reason }
}
