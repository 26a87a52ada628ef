import Foundation

/// A signed payload that passed every check of `SignedDataVerifier`, decoded as its kind.
public struct VerifiedSignedData<Payload: Sendable>: Sendable {
    /// The payload decoded by the model's decoder for its kind.
    public var payload: Payload
    /// The payload's JSON exactly as signed, for callers that keep or read more than the model does.
    public var json: Data
    /// The environment the payload names (`environment`, or `receiptType` for an app transaction). `xcode` and
    /// `localTesting` payloads were decoded without any signature check, because Apple does not sign them;
    /// they are returned only when those environments are accepted.
    public var environment: SignedDataEnvironment
    /// The payload's top-level `signedDate`, to the millisecond; nil where it has none.
    public var signedDate: Date?
}
