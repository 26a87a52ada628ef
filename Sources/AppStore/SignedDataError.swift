/// Why a signed payload was refused: Apple's verification status (as in its `SignedDataVerifier`) and, for
/// the log, what exactly failed. Never shown to the sender beyond the status class.
public struct SignedDataError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The statuses of Apple's `VerificationStatus`, plus the payload that verifies but does not decode.
    public enum Status: String, Sendable, Hashable, CaseIterable {
        /// Not a well-formed JWS, a wrong `alg` or `crit`, a chain that does not validate, a bad signature, or a
        /// registered JWT claim (`exp`, `nbf`…) that refuses it now: Apple's `VERIFICATION_FAILURE`.
        case verificationFailure
        /// `x5c` does not hold exactly three certificates: Apple's `INVALID_CHAIN_LENGTH`.
        case invalidChainLength
        /// `x5c[0]` or `x5c[1]` is not base64 DER of an X.509 certificate, or no root is trusted at all:
        /// Apple's `INVALID_CERTIFICATE`.
        case invalidCertificate
        /// The payload is for another app (`bundleId` or `appAppleId`): Apple's `INVALID_APP_IDENTIFIER`.
        case invalidAppIdentifier
        /// The payload's environment is not one of the accepted ones: Apple's `INVALID_ENVIRONMENT`.
        case invalidEnvironment
        /// The payload verifies and is for this app, but does not decode as its kind (a field of the wrong
        /// type, a required one missing); Apple's library throws its model's decoding error here.
        case undecodablePayload
    }

    /// Which check refused the payload.
    public var status: Status
    /// What failed, for the log (no secret is ever part of a signed payload's verdict).
    public var reason: String
    /// For `undecodablePayload`: the path of the offending field, when the decoder names one.
    public var field: String?

    /// Whether the signature, the certificate chain or the JWS form failed: the sender is not proven to be the
    /// App Store (as opposed to a verified payload for another app or environment, or one that does not decode).
    public var isAuthenticityFailure: Bool {
        switch status {
        case .verificationFailure, .invalidChainLength, .invalidCertificate: true
        case .invalidAppIdentifier, .invalidEnvironment, .undecodablePayload: false
        }
    }

    public var description: String { "signed payload refused (\(status.rawValue)): \(reason)" }

    /// A refusal with `status` because of `reason`.
    public init(_ status: Status, _ reason: String, field: String? = nil) {
        self.status = status
        self.reason = reason
        self.field = field
    }
}
