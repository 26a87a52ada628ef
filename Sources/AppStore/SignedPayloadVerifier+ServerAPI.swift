import Foundation

/// The signed-data verifier the Server API client uses today. Its successor, `SignedDataVerifier`, conforms
/// with one method per kind (`verifyTransaction`, `verifyRenewalInfo`, `verifyNotification`), returning the
/// verified JSON (`.json`); that conformance replaces this file.
extension SignedPayloadVerifier: ServerAPISignatureChecking {
    /// Every kind goes through the same chain and signature checks.
    public func verifiedPayload(of jws: String, kind: SignedFieldKind) async throws -> Data {
        try verify(jws)
    }
}
