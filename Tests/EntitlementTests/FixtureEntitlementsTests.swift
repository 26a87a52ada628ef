import EntitlementModel
import Foundation
import Testing

/// Every verifyReceipt sample Apple's status accepts, decoded and evaluated into entitlements, at the moment
/// after its newest purchase and long after: what each real receipt grants.
@Suite struct FixtureEntitlementsTests {
    /// The fixtures' products in a catalog: anything with an expiry is one auto-renewable group granting
    /// `subscriber`; `…N.months` passes are non-renewing; coins are consumables; the rest lifetime.
    static func catalog(for transactions: [StoreTransaction]) throws -> Catalog {
        let expiring = Set(transactions.filter { $0.expiresDate != nil }.map(\.productID))
        let products = try Set(transactions.map(\.productID)).sorted().map { id -> Product in
            if expiring.contains(id) {
                return try Product(productID: id, type: .autoRenewable, entitlements: ["subscriber"], subscriptionGroup: "fixture")
            }
            if id.contains("coin") {
                return try Product(productID: id, type: .consumable, currency: "coins", amount: 10)
            }
            if let months = id.split(separator: ".").dropLast().last.flatMap({ Int($0) }), id.hasSuffix(".months") {
                return try Product(productID: id, type: .nonRenewing, entitlements: ["pass"], duration: ISODuration(months: months))
            }
            return try Product(productID: id, type: .nonConsumable, entitlements: [id])
        }
        return try Catalog(products: products)
    }

    static func evaluate(_ name: String, at instant: (([StoreTransaction]) -> Date)) throws -> (EntitlementReport, [StoreTransaction]) {
        let response = try AppStoreResponse(jsonData: try Fixtures.data(name))
        let transactions = response.transactions()
        let environment = response.environment ?? .sandbox
        let report = EntitlementEvaluator.evaluate(
            transactions: transactions.map { OwnedTransaction($0, environment: environment) }, renewals: response.renewalInfo(),
            grants: [], catalog: try catalog(for: transactions), at: instant(transactions))
        return (report, transactions)
    }

    static let accepted = Fixtures.jsonNames(prefix: "verifyreceipt_status0_") + Fixtures.jsonNames(prefix: "verifyreceipt_status21006_")
    static let longAfter = Date(timeIntervalSince1970: 2_051_222_400)  // 2035-01-01

    @Test(arguments: accepted)
    func everyAcceptedReceiptYieldsConsistentEntitlements(name: String) throws {
        let (justAfter, transactions) = try Self.evaluate(name) { ($0.map(\.purchaseDate).max() ?? Self.longAfter).addingTimeInterval(1) }
        let (later, _) = try Self.evaluate(name) { _ in Self.longAfter }
        #expect(justAfter.unknownProducts.isEmpty && later.unknownProducts.isEmpty)
        let kinds = try Self.catalog(for: transactions)
        for transaction in transactions {
            guard let product = kinds.product(transaction.productID) else { continue }
            switch product.type {
            case .autoRenewable:
                // Every sample's subscriptions ended long before 2035.
                let subscriber = try #require(later.entitlements["subscriber"], "\(name)")
                #expect(!subscriber.active, "\(name)")
                #expect(justAfter.entitlements["subscriber"] != nil, "\(name)")
            case .nonConsumable:
                let owned = try #require(later.entitlements[product.productID], "\(name)")
                #expect(owned.active == (transaction.cancellationDate == nil) && owned.expiresAt == nil, "\(name)")
            case .consumable:
                #expect(later.entitlements[product.productID] == nil)
            case .nonRenewing:
                #expect(later.entitlements["pass"]?.active == false, "\(name)")
            }
        }
        // Whatever is active has not expired yet.
        for (_, entitlement) in justAfter.entitlements where entitlement.active {
            #expect(entitlement.expiresAt.map { $0 > transactions.map(\.purchaseDate).max()! } ?? true, "\(name)")
        }
    }

    @Test func refundedSubscriptionIsRefunded() throws {
        let (report, _) = try Self.evaluate("verifyreceipt_status0_refunded_sandbox_monza.json") { _ in Self.longAfter }
        #expect(report.entitlements["subscriber"]?.inactiveReason == .refunded)
    }

    @Test func nonRenewingPassesStack() throws {
        let (report, transactions) = try Self.evaluate("verifyreceipt_status0_ios7_nonrenewing_sandbox_itunesreceipt.json") {
            ($0.map(\.purchaseDate).max() ?? Self.longAfter).addingTimeInterval(1)
        }
        let ordered = transactions.sorted { $0.purchaseDate < $1.purchaseDate }
        let first = ordered[0], second = ordered[1]
        func months(_ t: StoreTransaction) -> Int { t.productID.contains(".6.") ? 6 : 3 }
        let firstEnd = ISODuration(months: months(first)).adding(to: first.purchaseDate)
        let expected = ISODuration(months: months(second)).adding(to: max(firstEnd, second.purchaseDate))
        let pass = try #require(report.entitlements["pass"])
        #expect(pass.active)
        #expect(pass.expiresAt == expected)
    }

    @Test func subscriptionThatWillNotRenewSaysSo() throws {
        let name = "verifyreceipt_status0_production_autorenew_not_renewing_venice.json"
        let (report, transactions) = try Self.evaluate(name) { $0.map(\.purchaseDate).max()!.addingTimeInterval(1) }
        let subscriber = try #require(report.entitlements["subscriber"])
        guard case .appStore(let purchase) = subscriber.source else { Issue.record("not from the App Store"); return }
        #expect(!purchase.willRenew)
        #expect(purchase.environment == .production)
        #expect(subscriber.expiresAt == transactions.compactMap(\.expiresDate).max())
    }

    @Test func crossgradeToAnnualLeavesOneActiveProduct() throws {
        let name = "verifyreceipt_status0_autorenew_monthly_to_annual_sandbox_revenuecat.json"
        let (report, transactions) = try Self.evaluate(name) { $0.map(\.purchaseDate).max()!.addingTimeInterval(1) }
        let newest = transactions.max { $0.purchaseDate < $1.purchaseDate }!
        let subscriber = try #require(report.entitlements["subscriber"])
        guard case .appStore(let purchase) = subscriber.source else { Issue.record("not from the App Store"); return }
        #expect(purchase.productID == newest.productID)
        #expect(subscriber.active)
        #expect(purchase.willRenew)
    }
}
