import Foundation
import Testing
@testable import EntitlementModel
@testable import ServiceRuntime
@testable import FakeAppStore

/// The hand-written JSON of the entitlements body against what `JSONEncoder` made of it before (through
/// `HTTPResponse.json`, the route's former encoder): the same bytes for every document.
@Suite struct EntitlementsJSONTests {
    /// Seeded, so a failure names a seed that reproduces it.
    typealias Generator = SplitMix64

    /// Characters that escaping and key order care about: every control, quote, backslash, slash, DEL,
    /// two-, three- and four-byte UTF-8, a combining mark, the line and paragraph separators.
    static let awkward: [Unicode.Scalar] = (0..<0x20).map { Unicode.Scalar(UInt8($0)) }
        + ["\"", "\\", "/", "\u{7F}", "é", "ß", "€", "\u{2028}", "\u{2029}", "\u{301}", "日", "😀", "\u{FEFF}", "\u{10FFFF}"]

    static func text(_ random: inout Generator, plain: Bool = false) -> String {
        let length = Int.random(in: 0...12, using: &random)
        var scalars = String.UnicodeScalarView()
        for _ in 0..<length {
            if plain || Bool.random(using: &random) {
                scalars.append(Unicode.Scalar(UInt8.random(in: 0x20...0x7E, using: &random)))
            } else {
                scalars.append(awkward.randomElement(using: &random)!)
            }
        }
        return String(scalars)
    }

    static func date(_ random: inout Generator) -> Date {
        switch Int.random(in: 0..<6, using: &random) {
        case 0: return Date(timeIntervalSince1970: Double(Int.random(in: 0...4_000_000_000, using: &random)))
        case 1: return Date(timeIntervalSince1970: Double.random(in: -1e10...1e10, using: &random))  // fractions, years before 1970
        case 2: return .distantFuture
        case 3: return Date(timeIntervalSince1970: Double.random(in: -1e15...1e15, using: &random))  // clamped
        default: return Date(timeIntervalSince1970: 1_795_305_600 + Double.random(in: -1e8...1e8, using: &random))
        }
    }

    static func entitlement(_ random: inout Generator) -> Entitlement {
        let expiresAt = Bool.random(using: &random) ? nil : date(&random)
        let reasons: [InactiveReason?] = [nil, nil, .expired, .refunded, .revoked, .billingRetryEnded]
        let inactive = reasons.randomElement(using: &random)!
        let source: EntitlementSource
        if Bool.random(using: &random) {
            source = .appStore(AppStorePurchase(
                productID: text(&random), productType: ProductType.allCases.randomElement(using: &random)!,
                environment: Bool.random(using: &random) ? .production : .sandbox,
                willRenew: Bool.random(using: &random), inGracePeriod: Bool.random(using: &random),
                inBillingRetry: Bool.random(using: &random),
                ownership: Bool.random(using: &random) ? .purchased : .familyShared,
                originalTransactionID: text(&random)))
        } else {
            source = .grant(id: text(&random), reason: text(&random))
        }
        return Entitlement(expiresAt: expiresAt, inactiveReason: inactive, source: source)
    }

    static func document(_ random: inout Generator) -> EntitlementsDocument {
        var entitlements: [String: Entitlement] = [:]
        for _ in 0..<Int.random(in: 0...6, using: &random) { entitlements[text(&random)] = entitlement(&random) }
        var consumables: [String: Int] = [:]
        let amounts = [0, 1, -1, 42, Int.max, Int.min, 1_000_000_000]
        for _ in 0..<Int.random(in: 0...4, using: &random) {
            consumables[text(&random)] = Bool.random(using: &random)
                ? amounts.randomElement(using: &random)! : Int.random(in: Int.min...Int.max, using: &random)
        }
        let unknown = (0..<[0, 0, 1, 3].randomElement(using: &random)!).map { _ in text(&random) }.sorted()
        let report = EntitlementReport(asOf: date(&random), entitlements: entitlements, unknownProducts: unknown)
        return EntitlementsDocument(userID: text(&random), report: report, consumables: consumables)
    }

    @Test func matchesJSONEncoderOverGeneratedDocuments() {
        for seed in UInt64(0)..<3_000 {
            var random = Generator(seed: seed)
            let document = Self.document(&random)
            let expected = HTTPResponse.json(document).body
            #expect(document.jsonBytes == expected, "seed \(seed): \(String(decoding: expected, as: UTF8.self))")
            if document.jsonBytes != expected { return }
        }
    }

    @Test func escapesEveryControlQuoteAndBackslashAndKeepsTheRest() {
        let everything = String(String.UnicodeScalarView((0..<0x80).map { Unicode.Scalar(UInt8($0)) })) + "é€😀\u{2028}"
        let report = EntitlementReport(
            asOf: Date(timeIntervalSince1970: 1_795_310_400.75),
            entitlements: [everything: Entitlement(expiresAt: nil, inactiveReason: .revoked, source: .grant(id: everything, reason: "/"))])
        let document = EntitlementsDocument(userID: everything, report: report, consumables: [everything: -7])
        #expect(document.jsonBytes == HTTPResponse.json(document).body)
        let text = String(decoding: document.jsonBytes, as: UTF8.self)
        #expect(text.hasPrefix(#"{"as_of":"2026-11-22T01:20:00Z","consumables":{"\u0000\u0001"#))
        #expect(text.contains(#"\b\t\n\u000b\f\r\u000e"#))
        #expect(text.contains(##" !\"#$%&'()*+,-./0"##))
        #expect(text.contains(#"[\\]^_`a"#))
        #expect(text.hasSuffix("\u{7F}é€😀\u{2028}\"}"))
    }

    @Test func ordersKeysByTheirUTF8Bytes() {
        // "Z" < "a" < "é" by bytes (0x5A, 0x61, 0xC3), "a" < "a_" < "ab": shorter first.
        let grant = Entitlement(expiresAt: nil, inactiveReason: nil, source: .grant(id: "g", reason: "r"))
        let report = EntitlementReport(asOf: Date(timeIntervalSince1970: 0),
                                       entitlements: ["é": grant, "a": grant, "Z": grant, "ab": grant, "a_": grant])
        let document = EntitlementsDocument(userID: "u", report: report, consumables: ["b": 1, "B": 2, "": 3])
        let text = String(decoding: document.jsonBytes, as: UTF8.self)
        #expect(text.contains(#""consumables":{"":3,"B":2,"b":1}"#))
        let names = ["\"Z\":", "\"a\":", "\"a_\":", "\"ab\":", "\"é\":"].map { text.range(of: $0)!.lowerBound }
        #expect(names == names.sorted())
        #expect(document.jsonBytes == HTTPResponse.json(document).body)
    }
}
