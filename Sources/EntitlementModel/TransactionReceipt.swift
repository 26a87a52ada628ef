import Foundation

/// An iOS 6 style transaction receipt (`SKPaymentTransaction.transactionReceipt`) read locally: an old-style
/// (NeXTSTEP) property list of quoted strings, `{ "signature" = "…"; "purchase-info" = "…"; … }`, whose
/// `purchase-info` is the base64 of another such list describing the one purchase.
///
/// As with ``AppReceipt``, the signature is not verified: its certificate expired in 2014 and only Apple's
/// verifyReceipt ever judged these.
public struct TransactionReceipt: Sendable, Hashable {
    /// `environment` of the outer list: `Sandbox`; absent (nil) in Production.
    public var environment: String?
    /// `bid`: the app's bundle identifier.
    public var bundleID: String
    /// `bvrs`: the app's bundle version.
    public var bundleVersion: String?
    /// `product-id`.
    public var productID: String
    /// `transaction-id`.
    public var transactionID: String
    /// `original-transaction-id`.
    public var originalTransactionID: String?
    /// `quantity`.
    public var quantity: Int?
    /// `purchase-date-ms`.
    public var purchaseDate: Date?
    /// `original-purchase-date-ms`.
    public var originalPurchaseDate: Date?

    /// Reads the bytes of a transaction receipt (the base64-decoded `receipt-data`). Throws, naming what is
    /// wrong, when they are not such a list with a `purchase-info` naming a bundle, product and transaction.
    public init(text bytes: [UInt8]) throws(ReceiptDecodingError) {
        let outer = try Self.dictionary(bytes, of: "the transaction receipt")
        guard let info = outer["purchase-info"] else { throw ReceiptDecodingError("the transaction receipt has no purchase-info") }
        guard let infoBytes = Data(base64Encoded: info) else { throw ReceiptDecodingError("purchase-info is not base64") }
        let purchase = try Self.dictionary(Array(infoBytes), of: "purchase-info")
        func required(_ key: String) throws(ReceiptDecodingError) -> String {
            guard let value = purchase[key] else { throw ReceiptDecodingError("purchase-info has no \(key)") }
            return value
        }
        func milliseconds(_ key: String) throws(ReceiptDecodingError) -> Date? {
            guard let text = purchase[key] else { return nil }
            guard let value = Int64(text) else { throw ReceiptDecodingError("purchase-info's \(key) is not a number") }
            return Date(timeIntervalSince1970: Double(value) / 1000)
        }
        environment = outer["environment"]
        bundleID = try required("bid")
        bundleVersion = purchase["bvrs"]
        productID = try required("product-id")
        transactionID = try required("transaction-id")
        originalTransactionID = purchase["original-transaction-id"]
        if let quantity = purchase["quantity"] {
            guard let value = Int(quantity) else { throw ReceiptDecodingError("purchase-info's quantity is not a number") }
            self.quantity = value
        }
        purchaseDate = try milliseconds("purchase-date-ms")
        originalPurchaseDate = try milliseconds("original-purchase-date-ms")
    }

    /// The purchase in an app receipt's terms.
    public var purchase: AppReceipt.Purchase {
        AppReceipt.Purchase(quantity: quantity, productID: productID, transactionID: transactionID,
                            originalTransactionID: originalTransactionID, purchaseDate: purchaseDate,
                            originalPurchaseDate: originalPurchaseDate)
    }

    /// A flat old-style dictionary of quoted strings: `{ "key" = "value"; … }` (a backslash escapes the next
    /// character). A key given twice is an error.
    private static func dictionary(_ bytes: [UInt8], of owner: String) throws(ReceiptDecodingError) -> [String: String] {
        var index = 0
        func skipSpace() {
            while index < bytes.count, [0x20, 0x09, 0x0a, 0x0d].contains(bytes[index]) { index += 1 }
        }
        func expect(_ character: Unicode.Scalar) throws(ReceiptDecodingError) {
            skipSpace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: character) else {
                throw ReceiptDecodingError("\(owner) is not an old-style property list: expected '\(character)' at byte \(index)")
            }
            index += 1
        }
        func quoted() throws(ReceiptDecodingError) -> String {
            try expect("\"")
            var text: [UInt8] = []
            while index < bytes.count, bytes[index] != UInt8(ascii: "\"") {
                if bytes[index] == UInt8(ascii: "\\") { index += 1 }
                if index < bytes.count { text.append(bytes[index]); index += 1 }
            }
            try expect("\"")
            guard let string = String(validating: text, as: UTF8.self) else { throw ReceiptDecodingError("\(owner) holds a string that is not UTF-8") }
            return string
        }
        var entries: [String: String] = [:]
        try expect("{")
        while true {
            skipSpace()
            if index < bytes.count, bytes[index] == UInt8(ascii: "}") { index += 1; break }
            let key = try quoted()
            try expect("=")
            let value = try quoted()
            try expect(";")
            guard entries.updateValue(value, forKey: key) == nil else { throw ReceiptDecodingError("\(owner) names \(key.prefix(64)) twice") }
        }
        skipSpace()
        guard index == bytes.count else { throw ReceiptDecodingError("\(owner) has bytes after its closing brace") }
        return entries
    }
}
