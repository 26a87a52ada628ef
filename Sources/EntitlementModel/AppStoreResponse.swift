import Foundation

/// The body of Apple's legacy `verifyReceipt` answer, in every format Apple used (iOS 6 flat receipts and
/// single-object `latest_receipt_info`, iOS 7+ app receipts with `in_app`, 2017+ `pending_renewal_info`).
///
/// Decoding is lenient about how values are typed (numbers and booleans as strings or not, dates as strings of
/// possibly fractional milliseconds) and ignores fields it does not know; every field Apple may omit is optional.
/// A value that is present but cannot mean what its field needs makes decoding fail with the field's path.
public struct AppStoreResponse: AppStoreDecodable, Sendable, Hashable {
    /// Apple's status code: `0` valid, `21006` valid but the subscription expired, `21000`–`21199` errors.
    public var status: Int
    /// `is-retryable` (also spelled `is_retryable`), sent with the `21100`–`21199` internal errors.
    public var isRetryable: Bool?
    /// Apple's old `exception` text that accompanied some errors (a Java exception message).
    public var exception: String?
    var contents: ReceiptContents

    /// The environment Apple says issued the receipt; absent in iOS 6 answers.
    public var environment: StoreEnvironment? { contents.environment }
    /// The decoded receipt that was sent (iOS 7+ app receipt, or an iOS 6 transaction receipt).
    public var receipt: Receipt? { contents.receipt }
    /// Every renewal of the receipt's subscriptions (`latest_receipt_info`, an array or one iOS 6 object).
    public var latestReceiptInfo: [StoreTransaction] { contents.latestReceiptInfo }
    /// iOS 6 answers with status `21006`: the last transaction of the expired subscription.
    public var latestExpiredReceiptInfo: [StoreTransaction] { contents.latestExpiredReceiptInfo }
    /// The newest base64 receipt, to store in place of the one that was sent.
    public var latestReceipt: String? { contents.latestReceipt }
    /// The app the receipt belongs to (`bundle_id`, or `bid` in iOS 6 receipts).
    public var bundleID: String? { contents.receipt?.bundleID }

    private enum CodingKeys: String, CodingKey {
        case status
        case isRetryable = "is-retryable"
        case isRetryableUnderscored = "is_retryable"
        case exception
    }

    /// Decodes the body leniently; prefer `init(jsonData:)`, whose errors name the offending field.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        guard let status = try container.appleInt(.status) else {
            throw DecodingError.keyNotFound(
                CodingKeys.status, .init(codingPath: [], debugDescription: "every verifyReceipt answer has a status")
            )
        }
        self.status = status
        isRetryable = try container.appleBool(.isRetryable) ?? container.appleBool(.isRetryableUnderscored)
        exception = try container.appleString(.exception)
        contents = try ReceiptContents(from: decoder)
    }

    /// Every transaction the answer mentions, once each: `receipt.in_app`, `latest_receipt_info`,
    /// `latest_expired_receipt_info` and the iOS 6 flat receipt, merged by `transactionID`. Where two lists hold
    /// the same transaction, the entry with more detail wins and the other fills the fields it lacks (so the
    /// cancellation that only `latest_receipt_info` carries is kept). Ordered by purchase date, then id.
    public func transactions() -> [StoreTransaction] { contents.transactions() }

    /// Renewal state of each subscription, from `pending_renewal_info` (where old answers omit
    /// `original_transaction_id`, it is taken from the newest transaction of the entry's product) and from the
    /// iOS 6 top-level `auto_renew_status`, `auto_renew_product_id`, `expiration_intent` and
    /// `is_in_billing_retry_period`. One entry per original transaction.
    public func renewalInfo() -> [RenewalInfo] { contents.renewalInfo() }
}

extension AppStoreResponse {
    /// The `receipt` object: an iOS 7+ app receipt, or (iOS 6) a single transaction with the app's `bid`.
    public struct Receipt: Decodable, Sendable, Hashable {
        /// `bundle_id`, or `bid` in iOS 6 receipts.
        public var bundleID: String?
        /// `application_version`, or `bvrs` in iOS 6 receipts.
        public var applicationVersion: String?
        /// `original_application_version`: the app version the user first bought or downloaded.
        public var originalApplicationVersion: String?
        /// `Production`, `ProductionSandbox`, `Xcode`…, as Apple wrote it.
        public var receiptType: String?
        /// `receipt_creation_date_ms`: when the App Store signed the receipt.
        public var creationDate: Date?
        /// `request_date_ms`: when Apple answered.
        public var requestDate: Date?
        /// `in_app`: unordered, and without consumables the app already finished.
        public var inApp: [StoreTransaction]
        /// The transaction an iOS 6 receipt is (it has `transaction_id` at its top level instead of `in_app`).
        public var legacyTransaction: StoreTransaction?

        private enum CodingKeys: String, CodingKey {
            case bundleID = "bundle_id", bid
            case applicationVersion = "application_version", bvrs
            case originalApplicationVersion = "original_application_version"
            case receiptType = "receipt_type"
            case creationDate = "receipt_creation_date_ms"
            case requestDate = "request_date_ms"
            case inApp = "in_app"
            case transactionID = "transaction_id"
        }

        /// Decodes either receipt format; an iOS 6 receipt also yields its `legacyTransaction`.
        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            bundleID = try container.appleString(.bundleID) ?? container.appleString(.bid)
            applicationVersion = try container.appleString(.applicationVersion) ?? container.appleString(.bvrs)
            originalApplicationVersion = try container.appleString(.originalApplicationVersion)
            receiptType = try container.appleString(.receiptType)
            creationDate = try container.appleMilliseconds(.creationDate)
            requestDate = try container.appleMilliseconds(.requestDate)
            inApp = try container.decodeIfPresent(OneOrMany<ReceiptEntry>.self, forKey: .inApp)?
                .elements.map(\.transaction) ?? []
            legacyTransaction = container.contains(.transactionID) ? try ReceiptEntry(from: decoder).transaction : nil
        }
    }
}

/// Why an App Store body could not be decoded: where (`receipt.in_app[3].purchase_date_ms`) and what was wrong.
public struct AppStoreDecodingError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The path of the offending field, empty when the body as a whole is wrong (not JSON, not an object).
    public var path: String
    /// What is wrong there, in the decoder's words.
    public var reason: String

    /// One line for the log: `malformed App Store body at <path>: <reason>`.
    public var description: String {
        path.isEmpty ? "malformed App Store body: \(reason)" : "malformed App Store body at \(path): \(reason)"
    }

    /// The error a decoder threw, with the path of the field it names.
    public init(_ error: any Error) {
        switch error {
        case DecodingError.keyNotFound(let key, let context):
            self.init(context.codingPath + [key], "missing (\(context.debugDescription))")
        case DecodingError.valueNotFound(_, let context):
            self.init(context.codingPath, "null where a value is required")
        case DecodingError.typeMismatch(_, let context), DecodingError.dataCorrupted(let context):
            let underlying = context.underlyingError.map { " (\($0))" } ?? ""
            self.init(context.codingPath, context.debugDescription + underlying)
        default:
            self.init([], String(describing: error))
        }
    }

    private init(_ codingPath: [any CodingKey], _ reason: String) {
        path = codingPath.reduce(into: "") { path, key in
            if let index = key.intValue {
                path += "[\(index)]"
            } else {
                path += path.isEmpty ? key.stringValue : ".\(key.stringValue)"
            }
        }
        self.reason = reason
    }
}
