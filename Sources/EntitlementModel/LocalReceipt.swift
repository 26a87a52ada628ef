/// A posted receipt as it reads without Apple: an app receipt (PKCS#7, iOS 7 and later) or an iOS 6
/// transaction receipt. Neither is verified here; what they say is a claim, good for refusing early what
/// Apple's answer would be refused for anyway.
public enum LocalReceipt: Sendable, Hashable {
    case app(AppReceipt)
    case transaction(TransactionReceipt)

    /// Reads the decoded `receipt-data`: BER beginning with a SEQUENCE is read as an app receipt, text beginning
    /// with `{` as a transaction receipt. Throws, naming what is wrong, when it is neither.
    public init(_ bytes: [UInt8]) throws(ReceiptDecodingError) {
        switch bytes.first {
        case 0x30?: self = .app(try AppReceipt(ber: bytes))
        case UInt8(ascii: "{")?: self = .transaction(try TransactionReceipt(text: bytes))
        default: throw ReceiptDecodingError("neither an app receipt (PKCS#7) nor a transaction receipt")
        }
    }

    /// The bundle identifier of the app the receipt claims to be for.
    public var bundleID: String {
        switch self {
        case .app(let receipt): receipt.bundleID
        case .transaction(let receipt): receipt.bundleID
        }
    }

    /// The purchases the receipt holds: an app receipt's in-app purchases, a transaction receipt's one.
    public var purchases: [AppReceipt.Purchase] {
        switch self {
        case .app(let receipt): receipt.inApp
        case .transaction(let receipt): [receipt.purchase]
        }
    }

    /// The environment the receipt claims, in the API's words: `Production`, `Sandbox` (an app receipt's
    /// `ProductionSandbox`, a transaction receipt's `Sandbox`) or `Xcode`; nil for an app receipt older than its
    /// receipt type (attribute 0). A transaction receipt without `environment` is a Production one.
    public var environment: String? {
        switch self {
        case .app(let receipt): receipt.receiptType == "ProductionSandbox" ? "Sandbox" : receipt.receiptType
        case .transaction(let receipt): receipt.environment ?? "Production"
        }
    }

    /// Why the receipt `bytes` (the decoded `receipt-data`) can be refused without asking Apple: they read as a
    /// receipt of another app than `expectedBundleID`, which verification would refuse after Apple's answer.
    /// Nil when only Apple can judge them: no bundle is expected, it is this app's, or they do not read as a
    /// receipt here (Apple may still know the form).
    public static func rejection(_ bytes: [UInt8], expectedBundleID: String?) -> String? {
        guard let expectedBundleID, let bundleID = try? bundleID(of: bytes), bundleID != expectedBundleID else { return nil }
        return "receipt is for \(bundleID.prefix(255)), not \(expectedBundleID)"
    }

    /// The bundle identifier of the receipt `bytes`, the one `LocalReceipt(bytes).bundleID` names, read without an
    /// app receipt's purchases (so a receipt whose purchases do not read still names its bundle).
    public static func bundleID(of bytes: [UInt8]) throws(ReceiptDecodingError) -> String {
        bytes.first == 0x30 ? try AppReceipt.bundleID(ber: bytes) : try LocalReceipt(bytes).bundleID
    }
}
