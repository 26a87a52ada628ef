import Foundation

/// The fields of a signed payload that decide whether to accept it, read before its signature is checked:
/// the dates its certificates are validated at, the app and environment it is for, and the registered JWT
/// claims. Values keep the form they were sent in, so that each check can judge them as Apple's library does.
struct SignedDataClaims: Decodable {
    /// `signedDate`: milliseconds since 1970 when the App Store signed the payload.
    var signedDate: Claim<Int64>
    /// `receiptCreationDate`: an app transaction's signing date (it has no `signedDate`).
    var receiptCreationDate: Claim<Int64>
    /// The top-level identity fields (transactions, renewal info, app transactions).
    var identity: Identity
    /// `receiptType`: an app transaction's environment.
    var receiptType: String?
    /// The part of a notification that names its app: `data`, else `summary`, else `externalPurchaseToken`,
    /// else `appData`, the first present and not null (as Apple's library picks it); nil when none is.
    var notificationPart: Identity?
    /// Why the registered JWT claims (`exp`, `nbf`, `iat`, `aud`, `sub`, `jti`) refuse the payload at a
    /// time, checked once the signature verifies.
    var registered: RegisteredClaims

    /// A field that may be absent (or null), hold a usable value, or hold something else.
    enum Claim<Value: Sendable>: Sendable {
        case absent
        case value(Value)
        case invalid
    }

    /// `bundleId`, `appAppleId` and `environment` of the payload or of a notification's part.
    struct Identity: Decodable {
        var bundleID: String?
        var appAppleID: Claim<Int64>
        var environment: String?
        /// `externalPurchaseId`: an external purchase token names its environment through its prefix.
        var externalPurchaseID: String?

        private enum CodingKeys: String, CodingKey { case bundleId, appAppleId, environment, externalPurchaseId }

        init(from decoder: any Decoder) throws {
            let fields = try decoder.container(keyedBy: CodingKeys.self)
            bundleID = try? fields.decodeIfPresent(String.self, forKey: .bundleId)
            appAppleID = fields.integer(.appAppleId)
            environment = try? fields.decodeIfPresent(String.self, forKey: .environment)
            externalPurchaseID = try? fields.decodeIfPresent(String.self, forKey: .externalPurchaseId)
        }
    }

    private enum CodingKeys: String, CodingKey {
        case signedDate, receiptCreationDate, receiptType, data, summary, externalPurchaseToken, appData
    }

    /// Decodes the claims; throws only when the payload is not a JSON object.
    init(from decoder: any Decoder) throws {
        let payload = try decoder.container(keyedBy: CodingKeys.self)
        signedDate = payload.integer(.signedDate)
        receiptCreationDate = payload.integer(.receiptCreationDate)
        identity = try Identity(from: decoder)
        receiptType = try? payload.decodeIfPresent(String.self, forKey: .receiptType)
        notificationPart = nil
        for key in [CodingKeys.data, .summary, .externalPurchaseToken, .appData] where payload.isPresent(key) {
            // A part that is not an object names no app: the bundle check refuses it.
            var part = (try? payload.decode(Identity.self, forKey: key)) ?? Identity.empty
            if key == .externalPurchaseToken {
                part.environment = part.externalPurchaseID?.hasPrefix("SANDBOX") == true ? "Sandbox" : "Production"
            }
            notificationPart = part
            break
        }
        registered = try RegisteredClaims(from: decoder)
    }
}

extension SignedDataClaims.Identity {
    /// A part with no fields.
    static let empty = Self(bundleID: nil, appAppleID: .absent, environment: nil, externalPurchaseID: nil)

    private init(bundleID: String?, appAppleID: SignedDataClaims.Claim<Int64>, environment: String?, externalPurchaseID: String?) {
        self.bundleID = bundleID
        self.appAppleID = appAppleID
        self.environment = environment
        self.externalPurchaseID = externalPurchaseID
    }
}

/// RFC 7519's registered claims where a payload has them. App Store payloads never do; Apple's Python library
/// (through PyJWT) enforces them anyway, and a verifier must never accept what Apple's refuses.
struct RegisteredClaims: Decodable {
    var expiration: SignedDataClaims.Claim<Int64>
    var notBefore: SignedDataClaims.Claim<Int64>
    var issuedAt: SignedDataClaims.Claim<Int64>
    /// `aud` is present and not empty: the payload is meant for an audience, and we are none.
    var hasAudience: Bool
    /// `sub` or `jti` is present and not a string.
    var hasMalformedIdentifier: Bool

    private enum CodingKeys: String, CodingKey { case exp, nbf, iat, aud, sub, jti }

    init(from decoder: any Decoder) throws {
        let claims = try decoder.container(keyedBy: CodingKeys.self)
        expiration = claims.integer(.exp)
        notBefore = claims.integer(.nbf)
        issuedAt = claims.integer(.iat)
        hasAudience = claims.isPresent(.aud) && !claims.isEmptyValue(.aud)
        hasMalformedIdentifier = [CodingKeys.sub, .jti].contains { claims.contains($0) && (try? claims.decode(String.self, forKey: $0)) == nil }
    }

    /// Why the claims refuse the payload at `now` (seconds since 1970); nil when they do not.
    func refusal(at now: Int64) -> String? {
        switch (expiration, notBefore, issuedAt) {
        case (.invalid, _, _), (_, .invalid, _), (_, _, .invalid): return "a registered time claim (exp, nbf, iat) is not a number"
        case (.value(let exp), _, _) where exp <= now: return "the payload's exp claim has passed"
        case (_, .value(let nbf), _) where nbf > now: return "the payload's nbf claim is in the future"
        case (_, _, .value(let iat)) where iat > now: return "the payload's iat claim is in the future"
        default: break
        }
        if hasAudience { return "the payload names an audience (aud), and this service is none" }
        if hasMalformedIdentifier { return "the payload's sub or jti claim is not a string" }
        return nil
    }
}

extension KeyedDecodingContainer {
    /// An integer sent as a JSON number (fractions truncated toward zero) or as a string of decimal digits,
    /// the forms Apple's library reads through Python's `int()`.
    fileprivate func integer(_ key: Key) -> SignedDataClaims.Claim<Int64> {
        guard isPresent(key) else { return .absent }
        if let integer = try? decode(Int64.self, forKey: key) { return .value(integer) }
        if let number = try? decode(Double.self, forKey: key), number.isFinite, abs(number) < 9e18 {
            return .value(Int64(number.rounded(.towardZero)))
        }
        if let text = try? decode(String.self, forKey: key), let integer = Int64(text) { return .value(integer) }
        return .invalid
    }

    /// Whether `key` is there and not null.
    fileprivate func isPresent(_ key: Key) -> Bool {
        contains(key) && (try? decodeNil(forKey: key)) == false
    }

    /// Whether `key` holds an empty string, list or object (or `false`/`0`): nothing Python would call truthy.
    fileprivate func isEmptyValue(_ key: Key) -> Bool {
        if let text = try? decode(String.self, forKey: key) { return text.isEmpty }
        if let list = try? decode([Discard].self, forKey: key) { return list.isEmpty }
        if let object = try? decode([String: Discard].self, forKey: key) { return object.isEmpty }
        if let flag = try? decode(Bool.self, forKey: key) { return !flag }
        if let number = try? decode(Double.self, forKey: key) { return number == 0 }
        return false
    }
}

/// Any JSON value, decoded only to be counted.
private struct Discard: Decodable {
    init(from decoder: any Decoder) throws {}
}
