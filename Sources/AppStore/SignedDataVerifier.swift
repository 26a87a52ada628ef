import Crypto
import EntitlementModel
import Foundation
@_spi(FixedExpiryValidationTime) import X509

/// Verifies every payload the App Store signs (transactions, renewal info, V2 notifications, app
/// transactions) with the rules and verdicts of Apple's own `SignedDataVerifier`, offline, and hands back the
/// payload decoded by the model.
///
/// A payload is accepted when, in this order:
/// 1. it is a compact JWS of three canonical base64url segments whose header and payload are JSON objects;
/// 2. its header has `alg` exactly `ES256` and an `x5c` of exactly three certificates: x5c[0] (the leaf) and
///    x5c[1] (the intermediate) are validated up to one of the trusted `roots` by swift-certificates'
///    `Verifier` (RFC 5280 plus `AppStoreChainPolicy`: Apple's marker extensions and the strict profile);
///    x5c[2] is never read, so a root is trusted only for being configured;
/// 3. every certificate of that path is valid at the payload's own top-level `signedDate` (`receiptCreationDate`
///    when it has none, as for an app transaction; the current time when it has neither), whole seconds;
/// 4. the header has no `crit`, and the leaf's P-256 key verifies the raw 64-byte `r || s` signature;
/// 5. registered JWT claims, where present, do not refuse it now (`exp`, `nbf`, `iat`, `aud`, `sub`, `jti`);
/// 6. it is for this app and an accepted environment: `bundleId` = `bundleID` (transactions, notifications,
///    app transactions; renewal info has none), `appAppleId` = `appAppleID` wherever the payload carries one
///    (and present on Production notifications and app transactions), `environment` (`receiptType` for an
///    app transaction) one of `environments`, compared exactly;
/// 7. it decodes as its kind.
///
/// Xcode and LocalTesting payloads are not signed by the App Store. When one of those environments is in
/// `environments`, a payload naming it is decoded without steps 2–5, as Apple's library does when configured
/// for it, and is then held to steps 6–7; payloads naming any other environment are verified in full as
/// always, so listing Xcode never weakens Production. (When only unsigned environments are listed, every
/// payload is read that way: none naming another environment can pass step 6, and the verdicts are exactly
/// those of Apple's library configured for Xcode or LocalTesting.) When neither is listed, such payloads are
/// refused.
///
/// Pure CPU work. A validated chain is remembered (`VerifiedChainCache`), so that a payload of a known leaf
/// costs about one ECDSA verification; the methods are `async` because a chain's first validation runs
/// swift-certificates' asynchronous verifier, and they run off the caller's actor.
public struct SignedDataVerifier: Sendable {
    /// The trust anchors (`APPLE_ROOT_CERTIFICATES`; Apple Root CA - G3 by default).
    public let roots: [Certificate]
    /// The app's bundle id (`APPLE_BUNDLE_ID`); nil refuses every payload that names an app.
    public let bundleID: String?
    /// The app's numeric Apple ID (`APPLE_APP_APPLE_ID`); nil refuses Production notifications and app
    /// transactions, which must carry it, and compares no other payload's.
    public let appAppleID: Int64?
    /// The environments whose payloads are accepted (`APPLE_SIGNED_ENVIRONMENTS`).
    public let environments: Set<SignedDataEnvironment>
    /// The current time: for payloads without a signing date, registered JWT claims and the chain cache.
    let now: @Sendable () -> Date
    let chains: VerifiedChainCache
    private let headers: JWSHeaderCache
    private let rootStore: CertificateStore

    /// A verifier trusting `roots` for the app `bundleID` / `appAppleID`, accepting `environments`.
    /// Validated chains are kept `chainCacheLifetime` seconds, at most `chainCacheCapacity` of them (0: nothing
    /// is cached, neither chains nor parsed headers).
    public init(roots: [Certificate] = [AppleRootCertificate.g3], bundleID: String?, appAppleID: Int64?,
                environments: Set<SignedDataEnvironment> = [.production, .sandbox],
                chainCacheCapacity: Int = 64, chainCacheLifetime: TimeInterval = 300,
                now: @escaping @Sendable () -> Date = { Date() }) {
        self.roots = roots
        self.bundleID = bundleID
        self.appAppleID = appAppleID
        self.environments = environments
        self.now = now
        chains = VerifiedChainCache(capacity: chainCacheCapacity, lifetime: chainCacheLifetime)
        headers = JWSHeaderCache(capacity: chainCacheCapacity > 0 ? 32 : 0)
        rootStore = CertificateStore(roots)
    }

    /// A signed transaction (`Transaction.jwsRepresentation`, `signedTransactionInfo`, the API's
    /// `signedTransactions`): bundle id, then environment (and the app's Apple ID, where it carries one).
    public func verifyTransaction(_ jws: String) async throws(SignedDataError) -> VerifiedSignedData<AppStoreTransactionV2> {
        try await verify(jws, as: AppStoreTransactionV2.self, names: { $0.identity }, requiresAppAppleIDInProduction: false, checksBundle: true)
    }

    /// Signed renewal info (`signedRenewalInfo`): environment only, as in Apple's library (it names no app).
    public func verifyRenewalInfo(_ jws: String) async throws(SignedDataError) -> VerifiedSignedData<AppStoreRenewalInfoV2> {
        try await verify(jws, as: AppStoreRenewalInfoV2.self, names: { $0.identity }, requiresAppAppleIDInProduction: false, checksBundle: false)
    }

    /// A V2 notification's `signedPayload`: bundle id, app Apple ID and environment of its `data` (else
    /// `summary`, `externalPurchaseToken`, `appData`). Its nested signed transaction and renewal info are
    /// not verified here: verify them with `verifyTransaction` and `verifyRenewalInfo`.
    public func verifyNotification(_ jws: String) async throws(SignedDataError) -> VerifiedSignedData<AppStoreNotificationV2> {
        try await verify(jws, as: AppStoreNotificationV2.self, names: { $0.notificationPart }, requiresAppAppleIDInProduction: true, checksBundle: true)
    }

    /// A signed app transaction (`AppTransaction.jwsRepresentation`): bundle id, app Apple ID, and
    /// `receiptType` as its environment.
    public func verifyAppTransaction(_ jws: String) async throws(SignedDataError) -> VerifiedSignedData<AppStoreAppTransaction> {
        try await verify(jws, as: AppStoreAppTransaction.self, names: { claims in
            var identity = claims.identity
            identity.environment = claims.receiptType
            return identity
        }, requiresAppAppleIDInProduction: true, checksBundle: true)
    }

    /// The pipeline every kind goes through; `names` picks the fields that say which app and environment the
    /// payload is for (nil: the payload names none).
    private func verify<Payload: AppStoreDecodable & Sendable>(
        _ jws: String, as kind: Payload.Type, names: (SignedDataClaims) -> SignedDataClaims.Identity?,
        requiresAppAppleIDInProduction: Bool, checksBundle: Bool
    ) async throws(SignedDataError) -> VerifiedSignedData<Payload> {
        let parsed = try SignedJWS(jws, headers: headers)
        let decoded: DecodedPayload<Payload>
        do {
            decoded = try DecodedPayload(parsed.payload)
        } catch {
            throw SignedDataError(.verificationFailure, "the JWS payload is not a JSON object")
        }
        let identity = names(decoded.claims)
        let claimed = identity?.environment.flatMap(SignedDataEnvironment.init(rawValue:))
        if acceptsUnsigned(claimed) {
            // Xcode and LocalTesting payloads carry no App Store signature to check (see the type's notes).
        } else {
            try await verifySignature(parsed, claims: decoded.claims)
        }
        try checkApp(identity, checksBundle: checksBundle, requiresAppAppleIDInProduction: requiresAppAppleIDInProduction)
        guard let environment = claimed, environments.contains(environment) else {
            let named = identity?.environment.map { "'\($0)'" } ?? "no environment"
            throw SignedDataError(.invalidEnvironment, "the payload names \(named), accepted: \(environments.map(\.rawValue).sorted().joined(separator: ", "))")
        }
        switch decoded.payload {
        case .success(let payload):
            let signedDate = decoded.claims.signedDate.value.map { Date(timeIntervalSince1970: Double($0) / 1000) }
            return VerifiedSignedData(payload: payload, json: Data(parsed.payload), environment: environment, signedDate: signedDate)
        case .failure(let error):
            throw SignedDataError(.undecodablePayload, error.description, field: error.path.isEmpty ? nil : error.path)
        }
    }

    /// Whether a payload naming `claimed` is decoded without verification: it names a listed Xcode or
    /// LocalTesting environment, or no App Store environment is listed at all (then nothing signed could be
    /// accepted, and the verdict is Apple's for a verifier configured for Xcode or LocalTesting).
    private func acceptsUnsigned(_ claimed: SignedDataEnvironment?) -> Bool {
        if let claimed, !claimed.isAppStoreSigned, environments.contains(claimed) { return true }
        return !environments.contains(where: \.isAppStoreSigned)
    }

    /// Steps 2–5: the header, the chain at the payload's date, the signature and the registered claims.
    private func verifySignature(_ jws: SignedJWS, claims: SignedDataClaims) async throws(SignedDataError) {
        let header = jws.header
        guard let chainLength = header.chainLength, chainLength > 0 else {
            throw SignedDataError(.verificationFailure, "the JWS header has no x5c certificate chain")
        }
        guard header.algorithm == "ES256" else {
            throw SignedDataError(.verificationFailure, "alg is \(header.algorithm.map { "'\($0)'" } ?? "missing"), expected ES256")
        }
        let date = try validationDate(claims)
        let leafKey = try await chainKey(header, length: chainLength, at: date)
        if let problem = header.parameterProblem {
            throw SignedDataError(.verificationFailure, problem)
        }
        guard jws.signature.count == 64, let signature = try? P256.Signing.ECDSASignature(rawRepresentation: jws.signature),
              leafKey.isValidSignature(signature, for: jws.signingInput) else {
            throw SignedDataError(.verificationFailure, "the ES256 signature does not verify with the leaf's key")
        }
        if let refusal = claims.registered.refusal(at: Int64(now().timeIntervalSince1970.rounded(.down))) {
            throw SignedDataError(.verificationFailure, refusal)
        }
    }

    /// The instant the chain is validated at: `signedDate`, else `receiptCreationDate`, else now, in whole seconds.
    private func validationDate(_ claims: SignedDataClaims) throws(SignedDataError) -> Date {
        let milliseconds: Int64
        switch (claims.signedDate, claims.receiptCreationDate) {
        case (.value(let value), _), (.absent, .value(let value)):
            milliseconds = value
        case (.absent, .absent):
            return Date(timeIntervalSince1970: now().timeIntervalSince1970.rounded(.down))
        case (.invalid, _), (.absent, .invalid):
            throw SignedDataError(.verificationFailure, "the payload's signing date is not a number of milliseconds")
        }
        let seconds = milliseconds >= 0 ? milliseconds / 1000 : -(-(milliseconds + 1) / 1000) - 1  // rounded down, never overflowing
        // X.509 validity is written in years 0001–9999, and swift-certificates traps on an instant outside them: no
        // certificate is valid there, so such a date fails as one outside every chain's validity would.
        guard Self.certificateYears.contains(seconds) else {
            throw SignedDataError(.verificationFailure, "the payload's signing date lies outside the years 0001–9999 certificates can be valid in")
        }
        return Date(timeIntervalSince1970: Double(seconds))
    }

    /// 0001-01-01T00:00:00Z ... 9999-12-31T23:59:59Z in seconds since 1970.
    private static let certificateYears: ClosedRange<Int64> = -62_135_596_800...253_402_300_799

    /// The leaf's key once x5c[0] and x5c[1] are validated up to a trusted root at `date` (or found so in the cache).
    private func chainKey(_ header: SignedJWS.Header, length: Int, at date: Date) async throws(SignedDataError) -> P256.Signing.PublicKey {
        guard !roots.isEmpty else { throw SignedDataError(.invalidCertificate, "no trusted root is configured") }
        guard length == 3 else {
            throw SignedDataError(.invalidChainLength, "x5c holds \(length) certificate(s), expected 3")
        }
        guard let leafDER = header.leafDER else {
            throw SignedDataError(.invalidCertificate, "x5c[0] is not base64 DER of an X.509 certificate")
        }
        guard let intermediateDER = header.intermediateDER else {
            throw SignedDataError(.invalidCertificate, "x5c[1] is not base64 DER of an X.509 certificate")
        }
        let key = VerifiedChainCache.Key(leaf: SampledBytes(leafDER[...]), intermediate: SampledBytes(intermediateDER[...]))
        let current = now()
        if let cached = chains.leafKey(key, at: date, now: current) { return cached }
        guard let leaf = try? Certificate(derEncoded: leafDER) else {
            throw SignedDataError(.invalidCertificate, "x5c[0] is not base64 DER of an X.509 certificate")
        }
        guard let intermediate = try? Certificate(derEncoded: intermediateDER) else {
            throw SignedDataError(.invalidCertificate, "x5c[1] is not base64 DER of an X.509 certificate")
        }
        var verifier = Verifier(rootCertificates: rootStore) {
            RFC5280Policy(fixedExpiryValidationTime: date)
            AppStoreChainPolicy()
        }
        switch await verifier.validate(leaf: leaf, intermediates: CertificateStore([intermediate])) {
        case .validCertificate(let chain):
            guard let leafKey = P256.Signing.PublicKey(leaf.publicKey) else {
                throw SignedDataError(.verificationFailure, "the leaf's key is not a P-256 key, as ES256 needs")
            }
            chains.insert(key, chain: chain, leafKey: leafKey, now: current)
            return leafKey
        case .couldNotValidate(let failures):
            // swift-certificates describes certificates in full (kilobytes); the log names them by subject.
            let reasons = failures.map { failure in
                failure.chain.reduce(failure.policyFailureReason.description) { reason, certificate in
                    reason.replacingOccurrences(of: String(describing: certificate), with: "'\(certificate.subject)'")
                }
            }
            let reason = reasons.isEmpty ? "no path from x5c[0] through x5c[1] to a trusted root" : reasons.joined(separator: "; ")
            throw SignedDataError(.verificationFailure, "the certificate chain does not validate at \(RFC3339.string(from: date)): \(reason)")
        }
    }

    /// Step 6 (bundle id and app Apple ID) for the fields `identity` gives; nil when the payload names no app.
    private func checkApp(_ identity: SignedDataClaims.Identity?, checksBundle: Bool, requiresAppAppleIDInProduction: Bool) throws(SignedDataError) {
        if checksBundle {
            guard let bundleID else { throw SignedDataError(.invalidAppIdentifier, "APPLE_BUNDLE_ID is not configured, so no payload is this app's") }
            guard let named = identity?.bundleID, named == bundleID else {
                let named = identity?.bundleID.map { "'\($0)'" } ?? "no bundleId"
                throw SignedDataError(.invalidAppIdentifier, "the payload names \(named), this app is '\(bundleID)'")
            }
        }
        let carried = identity?.appAppleID ?? .absent
        if requiresAppAppleIDInProduction, identity?.environment == SignedDataEnvironment.production.rawValue {
            guard let appAppleID else {
                throw SignedDataError(.invalidAppIdentifier, "APPLE_APP_APPLE_ID is not configured, and a Production payload of this kind must carry it")
            }
            guard case .value(appAppleID) = carried else {
                throw SignedDataError(.invalidAppIdentifier, "a Production payload of this kind must carry appAppleId \(appAppleID), it carries \(carried.text)")
            }
        }
        switch (carried, appAppleID) {
        case (.value(let value), let expected?) where value != expected:
            throw SignedDataError(.invalidAppIdentifier, "the payload's appAppleId is \(value), this app's is \(expected)")
        case (.invalid, _?):
            throw SignedDataError(.invalidAppIdentifier, "the payload's appAppleId is not a number")
        default:
            break
        }
    }
}

/// A payload parsed once, read for its claims and, independently, decoded as its model type (whose failure is
/// kept, to be reported only once the payload is proven authentic and for this app).
private struct DecodedPayload<Payload: AppStoreDecodable> {
    var claims: SignedDataClaims
    var payload: Result<Payload, AppStoreDecodingError>

    /// Throws when `json` is not a JSON object.
    init(_ json: [UInt8]) throws {
        let tree = try JSONTree.parse(json)
        guard case .object(let members) = tree else { throw SignedDataError(.verificationFailure, "not an object") }
        claims = SignedDataClaims(members)
        do {
            payload = .success(try Payload(from: JSONTreeDecoder(tree)))
        } catch {
            payload = .failure(AppStoreDecodingError(error))
        }
    }
}

extension SignedDataClaims.Claim<Int64> {
    /// The claim as a log shows it.
    var text: String {
        switch self {
        case .absent: "none"
        case .value(let value): "\(value)"
        case .invalid: "something that is not a number"
        }
    }
}
