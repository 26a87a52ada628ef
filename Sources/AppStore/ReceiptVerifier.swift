import ServiceRuntime
import EntitlementModel

/// Asks Apple about one receipt and classifies the answer (the App Store client; scripted in tests).
@Loop
public protocol ReceiptVerifier: AnyObject {
    /// Runs one verification (with its redirect and immediate repeats) starting at `firstEnvironment`.
    func verify(receiptData: String, firstEnvironment: StoreEnvironment) async -> VerificationFlow.Result
}
