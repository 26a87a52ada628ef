import Foundation
import Timestamps

/// An app receipt (iOS 7 and later) read locally: the PKCS#7 `SignedData` a device holds in its app bundle,
/// whose content is a SET of receipt attributes (`SEQUENCE { type INTEGER, version INTEGER, value OCTET
/// STRING }`, each value itself DER), one of them per in-app purchase.
///
/// Decoding does not verify the signature: only Apple (verifyReceipt, or the App Store Server API for the
/// transactions it names) says whether a receipt is genuine. What it gives is what the receipt claims before
/// anyone is asked: which app it is for, and which transactions it holds.
public struct AppReceipt: Sendable, Hashable {
    /// Attribute 0, `Production`, `ProductionSandbox` or `Xcode`; nil in receipts written before it existed.
    public var receiptType: String?
    /// Attribute 2: the app's bundle identifier.
    public var bundleID: String
    /// Attribute 3: the app version the receipt was created for (`CFBundleVersion`).
    public var applicationVersion: String?
    /// Attribute 19: the version of the app first purchased.
    public var originalApplicationVersion: String?
    /// Attribute 12: when the App Store created the receipt.
    public var creationDate: Date?
    /// Attribute 18: when the app itself was first purchased.
    public var originalPurchaseDate: Date?
    /// Attribute 21: when the receipt expires (Volume Purchase Program, and Xcode's receipts).
    public var expirationDate: Date?
    /// Attribute 17, in the receipt's order: its in-app purchases (finished consumables are left out by Apple).
    public var inApp: [Purchase]
    /// The DER certificates the `SignedData` carries (the signer's and its issuers'), in their order.
    public var certificates: [[UInt8]]

    /// One in-app purchase receipt (attribute 17).
    public struct Purchase: Sendable, Hashable {
        /// 1701.
        public var quantity: Int?
        /// 1702.
        public var productID: String
        /// 1703.
        public var transactionID: String
        /// 1705.
        public var originalTransactionID: String?
        /// 1704.
        public var purchaseDate: Date?
        /// 1706.
        public var originalPurchaseDate: Date?
        /// 1708: set for auto-renewable subscriptions.
        public var expiresDate: Date?
        /// 1712: set when Apple refunded the purchase.
        public var cancellationDate: Date?
        /// 1711.
        public var webOrderLineItemID: Int?
        /// 1713.
        public var isTrialPeriod: Bool?
        /// 1719.
        public var isInIntroOfferPeriod: Bool?
        /// 1721.
        public var promotionalOfferID: String?

        /// The purchase's original transaction id, or its own id when the receipt names none (a first purchase).
        public var originalOrOwnTransactionID: String { originalTransactionID ?? transactionID }

        init(quantity: Int?, productID: String, transactionID: String, originalTransactionID: String?,
             purchaseDate: Date?, originalPurchaseDate: Date?) {
            self.quantity = quantity
            self.productID = productID
            self.transactionID = transactionID
            self.originalTransactionID = originalTransactionID
            self.purchaseDate = purchaseDate
            self.originalPurchaseDate = originalPurchaseDate
        }
    }

    /// Reads the BER bytes of an app receipt (the base64-decoded `receipt-data`). Throws, naming what is
    /// wrong, when they are not a PKCS#7 `SignedData` holding receipt attributes with a bundle identifier.
    public init(ber bytes: [UInt8]) throws(ReceiptDecodingError) {
        let (signedData, attributes) = try Self.envelope(bytes)
        certificates = signedData.children.dropFirst(3).first { $0.isContext(0) && $0.isConstructed }?
            .children.map { Array($0.encoded) } ?? []
        bundleID = try Self.bundleID(attributes)
        receiptType = try attributes.text(0)
        applicationVersion = try attributes.text(3)
        originalApplicationVersion = try attributes.text(19)
        creationDate = try attributes.date(12)
        originalPurchaseDate = try attributes.date(18)
        expirationDate = try attributes.date(21)
        var inApp: [Purchase] = []
        for (index, value) in attributes.all(17).enumerated() { inApp.append(try Purchase(value, at: "in_app[\(index)]")) }
        self.inApp = inApp
    }

    /// The bundle identifier alone of the app receipt `bytes`: its purchases are not read (the bulk of a large
    /// receipt). Throws as ``init(ber:)`` does for the envelope and the bundle.
    public static func bundleID(ber bytes: [UInt8]) throws(ReceiptDecodingError) -> String {
        try bundleID(envelope(bytes).attributes)
    }

    /// The `SignedData` of `bytes` and the receipt attributes it holds.
    private static func envelope(_ bytes: [UInt8]) throws(ReceiptDecodingError) -> (signedData: BERNode, attributes: Attributes) {
        let signedData: BERNode, payload: BERNode
        do throws(BERError) {
            let contentInfo = try BERNode(bytes[...])
            guard contentInfo.isUniversal(BERNode.Universal.sequence), try contentInfo.child(0).isOID(Self.signedDataOID) else {
                throw BERError("its content type is not signedData")
            }
            signedData = try Self.explicit(contentInfo.child(1))
            let encapsulated = try signedData.child(2)
            guard try encapsulated.child(0).isOID(Self.dataOID) else { throw BERError("its encapsulated content is not data") }
            payload = try BERNode(try Self.explicit(encapsulated.child(1)).octets()[...])
        } catch {
            throw ReceiptDecodingError("not an app receipt (PKCS#7 SignedData): \(error)")
        }
        return (signedData, try attributes(payload, of: "the receipt"))
    }

    private static func bundleID(_ attributes: Attributes) throws(ReceiptDecodingError) -> String {
        guard let bundleID = try attributes.text(2) else { throw ReceiptDecodingError("the receipt has no bundle identifier (2)") }
        return bundleID
    }

    /// pkcs7-signedData, 1.2.840.113549.1.7.2, as its content octets.
    private static let signedDataOID: [UInt8] = [0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x07, 0x02]
    /// pkcs7-data, 1.2.840.113549.1.7.1.
    private static let dataOID: [UInt8] = [0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x07, 0x01]

    /// The one element inside an `[0] EXPLICIT`.
    private static func explicit(_ node: BERNode) throws(BERError) -> BERNode {
        guard node.isContext(0), node.isConstructed, node.children.count == 1 else { throw BERError("expected [0] EXPLICIT") }
        return node.children[0]
    }

    /// The attributes of a receipt or in-app purchase payload (a SET of `SEQUENCE { type, version, value }`).
    fileprivate static func attributes(_ set: BERNode, of owner: String) throws(ReceiptDecodingError) -> Attributes {
        guard set.isUniversal(BERNode.Universal.set), set.isConstructed else { throw ReceiptDecodingError("\(owner) is not a SET of attributes") }
        var values: [(type: Int, value: [UInt8])] = []
        for (index, attribute) in set.children.enumerated() {
            do throws(BERError) {
                guard attribute.isUniversal(BERNode.Universal.sequence) else { throw BERError("not a SEQUENCE") }
                values.append((try attribute.child(0).integer(), try attribute.child(2).octets()))
            } catch {
                throw ReceiptDecodingError("attribute \(index + 1) of \(owner): \(error)")
            }
        }
        return Attributes(owner: owner, values: values)
    }
}

extension AppReceipt.Purchase {
    fileprivate init(_ value: [UInt8], at path: String) throws(ReceiptDecodingError) {
        let set: BERNode
        do throws(BERError) { set = try BERNode(value[...]) } catch { throw ReceiptDecodingError("\(path): \(error)") }
        let attributes = try AppReceipt.attributes(set, of: path)
        guard let productID = try attributes.text(1702) else { throw ReceiptDecodingError("\(path) has no product_id (1702)") }
        guard let transactionID = try attributes.text(1703) else { throw ReceiptDecodingError("\(path) has no transaction_id (1703)") }
        self.init(quantity: try attributes.integer(1701), productID: productID, transactionID: transactionID,
                  originalTransactionID: try attributes.text(1705), purchaseDate: try attributes.date(1704),
                  originalPurchaseDate: try attributes.date(1706))
        expiresDate = try attributes.date(1708)
        cancellationDate = try attributes.date(1712)
        webOrderLineItemID = try attributes.integer(1711)
        isTrialPeriod = try attributes.integer(1713).map { $0 != 0 }
        isInIntroOfferPeriod = try attributes.integer(1719).map { $0 != 0 }
        promotionalOfferID = try attributes.text(1721)
    }
}

/// The attributes of one payload by type, each value read as DER on demand; errors name the owner and type.
private struct Attributes {
    let owner: String
    let values: [(type: Int, value: [UInt8])]

    /// Every value of `type`, in order.
    func all(_ type: Int) -> [[UInt8]] { values.filter { $0.type == type }.map(\.value) }

    /// The first value of `type` read as one element by `reading`; nil when the payload has none.
    private func read<T>(_ type: Int, _ reading: (BERNode) throws(BERError) -> T) throws(ReceiptDecodingError) -> T? {
        guard let value = values.first(where: { $0.type == type })?.value else { return nil }
        do throws(BERError) { return try reading(try BERNode(value[...])) } catch {
            throw ReceiptDecodingError("attribute \(type) of \(owner): \(error)")
        }
    }

    func text(_ type: Int) throws(ReceiptDecodingError) -> String? {
        try read(type) { node throws(BERError) in try node.text() }
    }

    func integer(_ type: Int) throws(ReceiptDecodingError) -> Int? {
        try read(type) { node throws(BERError) in try node.integer() }
    }

    /// An RFC 3339 date in an IA5String; an empty string (Apple's way of writing none) is nil. Xcode wrote
    /// offsets without their colon (`2020-07-22T18:33:15+0100`), read as RFC 3339's `+01:00`.
    func date(_ type: Int) throws(ReceiptDecodingError) -> Date? {
        guard var text = try text(type), !text.isEmpty else { return nil }
        let offset = text.utf8.suffix(5)
        if offset.count == 5, offset.first == UInt8(ascii: "+") || offset.first == UInt8(ascii: "-"),
           offset.dropFirst().allSatisfy({ (0x30...0x39).contains($0) }) {
            text.insert(":", at: text.index(text.endIndex, offsetBy: -2))
        }
        guard let date = RFC3339.date(from: text) else {
            throw ReceiptDecodingError("attribute \(type) of \(owner) is not an RFC 3339 date: \(text.prefix(40))")
        }
        return date
    }
}

extension BERNode {
    /// True when this is the OBJECT IDENTIFIER whose content octets are `oid`.
    fileprivate func isOID(_ oid: [UInt8]) -> Bool {
        isUniversal(Universal.objectIdentifier) && !isConstructed && content.elementsEqual(oid)
    }
}

/// Why bytes are not a receipt that can be read locally.
public struct ReceiptDecodingError: Error, Sendable, CustomStringConvertible {
    public var description: String
    /// An error with this message, which names the attribute or structure at fault.
    public init(_ description: String) { self.description = description }
}
