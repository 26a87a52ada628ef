import AppStore
import EntitlementModel

extension SignedDataEnvironment {
    /// The environment a purchase of this environment is recorded under: Xcode and LocalTesting payloads (accepted
    /// only when `APPLE_SIGNED_ENVIRONMENTS` lists them) count as Sandbox.
    var recorded: StoreEnvironment { self == .production ? .production : .sandbox }

    /// The id a transaction or purchase of this environment is recorded under: an App Store id as it is; an Xcode
    /// or LocalTesting one (unverifiable, and small integers every test session reuses) prefixed with the
    /// environment (`Xcode:0`), so that it never names, and so never claims, moves or refunds, a purchase the
    /// App Store signed.
    func recordedID(_ id: String) -> String { isAppStoreSigned ? id : rawValue + ":" + id }

    /// Whether recorded id `id` is one the App Store gave, which its Server API can be asked about: not an Xcode or
    /// LocalTesting one (``recordedID(_:)``), which no App Store knows.
    static func isAppStoreID(_ id: String) -> Bool { !id.contains(":") }

    /// `transaction` with its ids as recorded (``recordedID(_:)``).
    func recorded(_ transaction: StoreTransaction) -> StoreTransaction {
        var recorded = transaction
        recorded.transactionID = recordedID(transaction.transactionID)
        recorded.originalTransactionID = recordedID(transaction.originalTransactionID)
        return recorded
    }

    /// `renewal` with its purchase's id as recorded (``recordedID(_:)``).
    func recorded(_ renewal: RenewalInfo) -> RenewalInfo {
        var recorded = renewal
        recorded.originalTransactionID = recordedID(renewal.originalTransactionID)
        return recorded
    }
}
