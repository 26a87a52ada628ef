/// The fields of a signed payload that decide whether to accept it, read before its signature is checked:
/// the dates its certificates are validated at, the app and environment it is for, and the registered JWT
/// claims. Values keep the form they were sent in, so that each check can judge them as Apple's library does.
struct SignedDataClaims {
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
    /// The registered JWT claims, checked once the signature verifies.
    var registered: RegisteredClaims

    /// A field that may be absent (or null), hold a usable value, or hold something else.
    enum Claim<Value: Sendable>: Sendable {
        case absent
        case value(Value)
        case invalid

        /// The value when there is one.
        var value: Value? {
            if case .value(let value) = self { value } else { nil }
        }
    }

    /// `bundleId`, `appAppleId` and `environment` of the payload or of a notification's part.
    struct Identity {
        var bundleID: String?
        var appAppleID: Claim<Int64>
        var environment: String?

        /// The fields of `object`; a part that is not an object names nothing (the bundle check refuses it).
        init(_ object: JSONObject) {
            bundleID = object.string("bundleId")
            appAppleID = object.integer("appAppleId")
            environment = object.string("environment")
        }
    }

    /// The claims of `payload`, a JSON object's members.
    init(_ payload: JSONObject) {
        signedDate = payload.integer("signedDate")
        receiptCreationDate = payload.integer("receiptCreationDate")
        identity = Identity(payload)
        receiptType = payload.string("receiptType")
        notificationPart = nil
        for key in ["data", "summary", "externalPurchaseToken", "appData"] {
            guard let value = payload[key] else { continue }
            if case .null = value { continue }
            let object = if case .object(let members) = value { members } else { JSONObject([]) }
            var part = Identity(object)
            if key == "externalPurchaseToken" {
                part.environment = object.string("externalPurchaseId")?.hasPrefix("SANDBOX") == true ? "Sandbox" : "Production"
            }
            notificationPart = part
            break
        }
        registered = RegisteredClaims(payload)
    }
}

/// RFC 7519's registered claims where a payload has them. App Store payloads never do; Apple's Python library
/// (through PyJWT) enforces them anyway, and a verifier must never accept what Apple's refuses.
struct RegisteredClaims {
    var expiration: SignedDataClaims.Claim<Int64>
    var notBefore: SignedDataClaims.Claim<Int64>
    var issuedAt: SignedDataClaims.Claim<Int64>
    /// `aud` is present and not empty: the payload is meant for an audience, and we are none.
    var hasAudience: Bool
    /// `sub` or `jti` is present and not a string.
    var hasMalformedIdentifier: Bool

    init(_ payload: JSONObject) {
        expiration = payload.timeClaim("exp")
        notBefore = payload.timeClaim("nbf")
        issuedAt = payload.timeClaim("iat")
        hasAudience = switch payload["aud"] {
        case nil, .null?, .bool(false)?: false
        case .string(let text)?: !text.isEmpty
        case .array(let elements)?: !elements.isEmpty
        case .object(let members)?: !members.isEmpty
        case .number(let text)?: Double(text) != 0
        case .bool(true)?: true
        }
        hasMalformedIdentifier = ["sub", "jti"].contains { key in
            switch payload[key] {
            case nil, .string?: false
            default: true
            }
        }
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

extension JSONObject {
    /// The member `key` when it is a string.
    fileprivate func string(_ key: String) -> String? {
        if case .string(let text)? = self[key] { text } else { nil }
    }

    /// The member `key` as an integer: a JSON number (fractions truncated toward zero) or a string of decimal
    /// digits, the forms Apple's library reads through Python's `int()`; absent when missing or null.
    fileprivate func integer(_ key: String) -> SignedDataClaims.Claim<Int64> {
        switch self[key] {
        case nil, .null?:
            return .absent
        case .number(let text)?:
            if let integer = Int64(text) { return .value(integer) }
            if let number = Double(text), number.isFinite, abs(number) < 9e18 { return .value(Int64(number.rounded(.towardZero))) }
            return .invalid
        case .string(let text)?:
            return Int64(text).map { .value($0) } ?? .invalid
        default:
            return .invalid
        }
    }

    /// A registered time claim (`exp`, `nbf`, `iat`) read as `integer` reads it, except that a null is invalid:
    /// PyJWT checks a claim that is present, and `int(None)` fails.
    fileprivate func timeClaim(_ key: String) -> SignedDataClaims.Claim<Int64> {
        if case .null? = self[key] { return .invalid }
        return integer(key)
    }
}
