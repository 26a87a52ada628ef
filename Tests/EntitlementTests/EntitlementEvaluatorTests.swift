import Foundation
import Testing
import EntitlementModel
@testable import AppStore
@testable import EntitlementService
@testable import FakeAppStore
@testable import ServiceRuntime

// MARK: - Fixtures

private enum ID {
    static let monthly = "com.example.premium.monthly"
    static let annual = "com.example.premium.annual"
    static let basic = "com.example.basic.monthly"
    static let pro = "com.example.pro.monthly"
    static let news = "com.example.news.monthly"
    static let sports = "com.example.sports.monthly"
    static let passMonth = "com.example.pass.month"
    static let passWeek = "com.example.pass.week"
    static let lifetime = "com.example.lifetime"
    static let coins = "com.example.coins.100"
}

private func catalog() throws -> Catalog {
    try Catalog(json: Data("""
        {"products": [
          {"product_id": "\(ID.monthly)", "type": "auto_renewable", "entitlements": ["premium"],
           "subscription_group": "main"},
          {"product_id": "\(ID.annual)", "type": "auto_renewable", "entitlements": ["premium"],
           "subscription_group": "main"},
          {"product_id": "\(ID.basic)", "type": "auto_renewable", "entitlements": ["basic"],
           "subscription_group": "main"},
          {"product_id": "\(ID.pro)", "type": "auto_renewable", "entitlements": ["premium", "pro"],
           "subscription_group": "main"},
          {"product_id": "\(ID.news)", "type": "auto_renewable", "entitlements": ["news"]},
          {"product_id": "\(ID.sports)", "type": "auto_renewable", "entitlements": ["sports"]},
          {"product_id": "\(ID.passMonth)", "type": "non_renewing", "entitlements": ["premium"], "duration": "P1M"},
          {"product_id": "\(ID.passWeek)", "type": "non_renewing", "entitlements": ["premium"], "duration": "P1W"},
          {"product_id": "\(ID.lifetime)", "type": "non_consumable", "entitlements": ["premium", "themes"]},
          {"product_id": "\(ID.coins)", "type": "consumable", "entitlements": ["coin_badge"], "currency": "coins",
           "amount": 100}
        ]}
        """.utf8))
}

private func utc(_ text: String) -> Date {
    guard let date = RFC3339.date(from: text) else { preconditionFailure("bad test date \(text)") }
    return date
}

/// An auto-renewable transaction; dates are RFC 3339.
private func subscription(
    _ id: String, original: String, product: String = ID.monthly, purchased: String, expires: String?,
    cancelled: String? = nil, upgraded: Bool = false, ownership: Ownership = .purchased, group: String? = nil,
    environment: StoreEnvironment = .production
) -> OwnedTransaction {
    OwnedTransaction(
        StoreTransaction(
            transactionID: id, originalTransactionID: original, productID: product, purchaseDate: utc(purchased),
            expiresDate: expires.map(utc), cancellationDate: cancelled.map(utc), isUpgraded: upgraded,
            ownership: ownership, subscriptionGroupIdentifier: group),
        environment: environment)
}

/// A one-off purchase (its own original transaction).
private func purchase(
    _ id: String, product: String, purchased: String, cancelled: String? = nil, ownership: Ownership = .purchased
) -> OwnedTransaction {
    OwnedTransaction(
        StoreTransaction(transactionID: id, originalTransactionID: id, productID: product,
                         purchaseDate: utc(purchased), cancellationDate: cancelled.map(utc), ownership: ownership),
        environment: .production)
}

private func renewal(
    _ original: String, product: String = ID.monthly, willRenew: Bool = true, retry: Bool = false,
    intent: Int? = nil, grace: String? = nil
) -> RenewalInfo {
    RenewalInfo(originalTransactionID: original, productID: product, willRenew: willRenew, expirationIntent: intent,
                isInBillingRetryPeriod: retry, gracePeriodExpiresDate: grace.map(utc))
}

private func grant(
    _ id: String, _ entitlement: String = "premium", created: String, expires: String? = nil, revoked: String? = nil
) -> Grant {
    Grant(id: id, userID: "u1", entitlement: entitlement, createdAt: utc(created), expiresAt: expires.map(utc),
          revokedAt: revoked.map(utc), reason: "support")
}

private func evaluate(
    _ transactions: [OwnedTransaction] = [], renewals: [RenewalInfo] = [], grants: [Grant] = [], at: String
) throws -> EntitlementReport {
    EntitlementEvaluator.evaluate(transactions: transactions, renewals: renewals, grants: grants,
                                  catalog: try catalog(), at: utc(at))
}

/// The entitlement an App Store purchase should yield.
private func store(
    _ product: String, _ type: ProductType = .autoRenewable, original: String, expires: String?,
    inactive reason: InactiveReason? = nil, willRenew: Bool = false, grace: Bool = false, retry: Bool = false,
    ownership: Ownership = .purchased, environment: StoreEnvironment = .production
) -> Entitlement {
    Entitlement(
        expiresAt: expires.map(utc), inactiveReason: reason,
        source: .appStore(AppStorePurchase(
            productID: product, productType: type, environment: environment, willRenew: willRenew,
            inGracePeriod: grace, inBillingRetry: retry, ownership: ownership, originalTransactionID: original)))
}

private func granted(_ id: String, expires: String?, inactive reason: InactiveReason? = nil) -> Entitlement {
    Entitlement(expiresAt: expires.map(utc), inactiveReason: reason, source: .grant(id: id, reason: "support"))
}

/// Three monthly periods of chain 1000: Jan 10 – Feb 10 – Mar 10 – Apr 10, 2026, at noon.
private let monthlyChain = [
    subscription("1001", original: "1000", purchased: "2026-01-10T12:00:00Z", expires: "2026-02-10T12:00:00Z"),
    subscription("1002", original: "1000", purchased: "2026-02-10T12:00:00Z", expires: "2026-03-10T12:00:00Z"),
    subscription("1003", original: "1000", purchased: "2026-03-10T12:00:00Z", expires: "2026-04-10T12:00:00Z"),
]

/// The service's `JSONValue`, for comparing encodings structurally.
extension JSONValue {
    init(json: String) throws {
        self = try JSONDecoder().decode(JSONValue.self, from: Data(json.utf8))
    }

    init(encoding value: some Encodable) throws {
        self = try JSONDecoder().decode(JSONValue.self, from: JSONEncoder().encode(value))
    }

    var keys: Set<String> {
        guard case .object(let members) = self else { return [] }
        return Set(members.keys)
    }
}

// MARK: - Auto-renewable subscriptions

@Suite struct EntitlementEvaluatorSubscriptionTests {
    @Test func latestRenewalDecides() throws {
        let report = try evaluate(monthlyChain, renewals: [renewal("1000")], at: "2026-03-15T00:00:00Z")
        #expect(report.entitlements == [
            "premium": store(ID.monthly, original: "1000", expires: "2026-04-10T12:00:00Z", willRenew: true),
        ])
        #expect(report.asOf == utc("2026-03-15T00:00:00Z"))
        #expect(report.unknownProducts.isEmpty)
    }

    @Test func theLatestExpiryDecidesWhateverTheOrder() throws {
        let report = try evaluate(monthlyChain.reversed(), at: "2026-03-15T00:00:00Z")
        #expect(report.entitlements["premium"]?.expiresAt == utc("2026-04-10T12:00:00Z"))
    }

    @Test func expiresWhenThePeriodEnds() throws {
        let justBefore = try evaluate(monthlyChain, at: "2026-04-10T11:59:59Z")
        #expect(justBefore.entitlements["premium"]?.active == true)
        let atExpiry = try evaluate(monthlyChain, renewals: [renewal("1000", willRenew: false)],
                                    at: "2026-04-10T12:00:00Z")
        #expect(atExpiry.entitlements == [
            "premium": store(ID.monthly, original: "1000", expires: "2026-04-10T12:00:00Z", inactive: .expired),
        ])
    }

    @Test func aPastInstantSeesOnlyWhatExistedThen() throws {
        // Apple now says the subscription will not renew, but on Feb 15 the March renewal was still to come.
        let report = try evaluate(monthlyChain, renewals: [renewal("1000", willRenew: false, retry: true)],
                                  at: "2026-02-15T00:00:00Z")
        #expect(report.entitlements == [
            "premium": store(ID.monthly, original: "1000", expires: "2026-03-10T12:00:00Z", willRenew: true),
        ])
        let beforeEverything = try evaluate(monthlyChain, renewals: [renewal("1000")], at: "2026-01-10T11:59:59Z")
        #expect(beforeEverything.entitlements.isEmpty)
    }

    @Test func gracePeriodKeepsAccess() throws {
        let renewals = [renewal("1000", retry: true, intent: 2, grace: "2026-04-26T12:00:00Z")]
        let inGrace = try evaluate(monthlyChain, renewals: renewals, at: "2026-04-15T00:00:00Z")
        #expect(inGrace.entitlements == [
            "premium": store(ID.monthly, original: "1000", expires: "2026-04-26T12:00:00Z", willRenew: true,
                             grace: true, retry: true),
        ])
        let beforeExpiry = try evaluate(monthlyChain, renewals: renewals, at: "2026-04-01T00:00:00Z")
        #expect(beforeExpiry.entitlements == [
            "premium": store(ID.monthly, original: "1000", expires: "2026-04-10T12:00:00Z", willRenew: true),
        ])
        let afterGrace = try evaluate(monthlyChain, renewals: renewals, at: "2026-04-26T12:00:00Z")
        #expect(afterGrace.entitlements == [
            "premium": store(ID.monthly, original: "1000", expires: "2026-04-26T12:00:00Z", inactive: .expired,
                             willRenew: true, retry: true),
        ])
    }

    @Test func aGracePeriodOfAnEarlierPeriodIsIgnored() throws {
        let report = try evaluate(monthlyChain, renewals: [renewal("1000", grace: "2026-03-20T00:00:00Z")],
                                  at: "2026-04-15T00:00:00Z")
        #expect(report.entitlements["premium"] == store(
            ID.monthly, original: "1000", expires: "2026-04-10T12:00:00Z", inactive: .expired, willRenew: true))
    }

    @Test func billingRetryWithoutGraceIsExpiredButRetrying() throws {
        let report = try evaluate(monthlyChain, renewals: [renewal("1000", retry: true, intent: 2)],
                                  at: "2026-05-01T00:00:00Z")
        #expect(report.entitlements["premium"] == store(
            ID.monthly, original: "1000", expires: "2026-04-10T12:00:00Z", inactive: .expired, willRenew: true,
            retry: true))
    }

    @Test(arguments: [(Int?(2), InactiveReason.billingRetryEnded), (1, .expired), (3, .expired), (nil, .expired)])
    func billingRetryEndsOnlyAfterABillingError(intent: Int?, reason: InactiveReason) throws {
        let report = try evaluate(monthlyChain, renewals: [renewal("1000", willRenew: false, intent: intent)],
                                  at: "2026-06-01T00:00:00Z")
        #expect(report.entitlements["premium"] == store(
            ID.monthly, original: "1000", expires: "2026-04-10T12:00:00Z", inactive: reason))
    }

    @Test func theLastRenewalInfoGivenWins() throws {
        let report = try evaluate(monthlyChain, renewals: [renewal("1000", willRenew: true),
                                                           renewal("1000", willRenew: false)],
                                  at: "2026-03-15T00:00:00Z")
        #expect(report.entitlements["premium"]?.source == store(
            ID.monthly, original: "1000", expires: nil, willRenew: false).source)
    }

    @Test func aRefundEndsAccessAtOnce() throws {
        var chain = monthlyChain
        chain[2].transaction.cancellationDate = utc("2026-03-20T08:00:00Z")
        let beforeRefund = try evaluate(chain, renewals: [renewal("1000")], at: "2026-03-20T07:59:59Z")
        #expect(beforeRefund.entitlements["premium"] == store(
            ID.monthly, original: "1000", expires: "2026-04-10T12:00:00Z", willRenew: true))
        let afterRefund = try evaluate(chain, renewals: [renewal("1000", willRenew: false)],
                                       at: "2026-03-20T08:00:00Z")
        #expect(afterRefund.entitlements == [
            "premium": store(ID.monthly, original: "1000", expires: "2026-03-20T08:00:00Z", inactive: .refunded),
        ])
    }

    @Test func aRefundedOldPeriodLeavesTheCurrentOne() throws {
        var chain = monthlyChain
        chain[0].transaction.cancellationDate = utc("2026-03-01T00:00:00Z")
        let report = try evaluate(chain, renewals: [renewal("1000")], at: "2026-03-15T00:00:00Z")
        #expect(report.entitlements["premium"] == store(
            ID.monthly, original: "1000", expires: "2026-04-10T12:00:00Z", willRenew: true))
    }

    @Test(arguments: [true, false])
    func anUpgradeStopsTheOldProductAtTheUpgrade(withCancellationDate: Bool) throws {
        let chain = [
            subscription("2001", original: "2000", product: ID.basic, purchased: "2026-01-10T00:00:00Z",
                         expires: "2026-02-10T00:00:00Z",
                         cancelled: withCancellationDate ? "2026-01-20T00:00:00Z" : nil, upgraded: true),
            subscription("2002", original: "2000", product: ID.pro, purchased: "2026-01-20T00:00:00Z",
                         expires: "2026-02-20T00:00:00Z"),
        ]
        let renewals = [renewal("2000", product: ID.pro)]
        let before = try evaluate(chain, renewals: renewals, at: "2026-01-15T00:00:00Z")
        #expect(before.entitlements == [
            "basic": store(ID.basic, original: "2000", expires: "2026-02-10T00:00:00Z", willRenew: true),
        ])
        let after = try evaluate(chain, renewals: renewals, at: "2026-01-25T00:00:00Z")
        #expect(after.entitlements == [
            "premium": store(ID.pro, original: "2000", expires: "2026-02-20T00:00:00Z", willRenew: true),
            "pro": store(ID.pro, original: "2000", expires: "2026-02-20T00:00:00Z", willRenew: true),
            "basic": store(ID.basic, original: "2000", expires: "2026-01-20T00:00:00Z", inactive: .expired),
        ])
    }

    /// Get All Subscription Statuses shows only the newest transaction, so the upgraded one may never carry
    /// Apple's flag: a later transaction of another product beginning before its expiry ended it all the same,
    /// and refunding the upgrade leaves nothing active.
    @Test func anUpgradeKnownOnlyByItsOverlapEndsTheEarlierProduct() throws {
        let chain = [
            subscription("6001", original: "6000", product: ID.monthly, purchased: "2026-01-10T00:00:00Z",
                         expires: "2026-02-10T00:00:00Z"),
            subscription("6002", original: "6000", product: ID.annual, purchased: "2026-01-20T00:00:00Z",
                         expires: "2027-01-20T00:00:00Z", cancelled: "2026-01-25T00:00:00Z"),
        ]
        let upgraded = try evaluate(chain, at: "2026-01-22T00:00:00Z")
        #expect(upgraded.entitlements == ["premium": store(ID.annual, original: "6000", expires: "2027-01-20T00:00:00Z")])
        let refunded = try evaluate(chain, at: "2026-01-26T00:00:00Z")
        #expect(refunded.entitlements == [
            "premium": store(ID.annual, original: "6000", expires: "2026-01-25T00:00:00Z", inactive: .refunded),
        ])
    }

    @Test func anUpgradeIsNotARefund() throws {
        // An upgraded transaction whose expiry is later than its replacement's still does not decide.
        let chain = [
            subscription("2001", original: "2000", product: ID.annual, purchased: "2026-01-10T00:00:00Z",
                         expires: "2027-01-10T00:00:00Z", cancelled: "2026-01-20T00:00:00Z", upgraded: true),
            subscription("2002", original: "2000", product: ID.pro, purchased: "2026-01-20T00:00:00Z",
                         expires: "2026-02-20T00:00:00Z"),
        ]
        let report = try evaluate(chain, at: "2026-03-01T00:00:00Z")
        #expect(report.entitlements == [
            "premium": store(ID.pro, original: "2000", expires: "2026-02-20T00:00:00Z", inactive: .expired),
            "pro": store(ID.pro, original: "2000", expires: "2026-02-20T00:00:00Z", inactive: .expired),
        ])
    }

    @Test func aDowngradeLeavesTheEarlierProductListedAsExpired() throws {
        let chain = [
            subscription("5001", original: "5000", product: ID.pro, purchased: "2026-01-01T00:00:00Z",
                         expires: "2026-02-01T00:00:00Z"),
            subscription("5002", original: "5000", product: ID.basic, purchased: "2026-02-01T00:00:00Z",
                         expires: "2026-03-01T00:00:00Z"),
        ]
        let report = try evaluate(chain, renewals: [renewal("5000", product: ID.basic)], at: "2026-02-15T00:00:00Z")
        #expect(report.entitlements == [
            "basic": store(ID.basic, original: "5000", expires: "2026-03-01T00:00:00Z", willRenew: true),
            "premium": store(ID.pro, original: "5000", expires: "2026-02-01T00:00:00Z", inactive: .expired),
            "pro": store(ID.pro, original: "5000", expires: "2026-02-01T00:00:00Z", inactive: .expired),
        ])
    }

    @Test func oneGroupNeverYieldsTwoActiveProducts() throws {
        let own = subscription("3001", original: "3000", product: ID.monthly, purchased: "2026-02-10T00:00:00Z",
                               expires: "2026-03-10T00:00:00Z")
        let shared = subscription("4001", original: "4000", product: ID.pro, purchased: "2026-02-05T00:00:00Z",
                                  expires: "2026-03-05T00:00:00Z", ownership: .familyShared)
        let ownLasts = try evaluate([own, shared], at: "2026-02-20T00:00:00Z")
        // The shared subscription, bought first, had `pro` until the user's own purchase took the group over.
        #expect(ownLasts.entitlements == [
            "premium": store(ID.monthly, original: "3000", expires: "2026-03-10T00:00:00Z"),
            "pro": store(ID.pro, original: "4000", expires: "2026-02-10T00:00:00Z", inactive: .expired, ownership: .familyShared),
        ])
        let before = try evaluate([own, shared], at: "2026-02-07T00:00:00Z")
        #expect(before.entitlements["pro"]?.active == true && before.entitlements["premium"]?.active == true)

        var longerShared = shared
        longerShared.transaction.expiresDate = utc("2026-03-15T00:00:00Z")
        let sharedLasts = try evaluate([own, longerShared], at: "2026-02-20T00:00:00Z")
        #expect(sharedLasts.entitlements == [
            "premium": store(ID.pro, original: "4000", expires: "2026-03-15T00:00:00Z", ownership: .familyShared),
            "pro": store(ID.pro, original: "4000", expires: "2026-03-15T00:00:00Z", ownership: .familyShared),
        ])
    }

    @Test func aGroupTieGoesToTheUsersOwnPurchase() throws {
        let shared = subscription("4001", original: "4000", product: ID.pro, purchased: "2026-02-01T00:00:00Z",
                                  expires: "2026-03-10T00:00:00Z", ownership: .familyShared)
        let own = subscription("3001", original: "3000", product: ID.basic, purchased: "2026-02-10T00:00:00Z",
                               expires: "2026-03-10T00:00:00Z")
        let report = try evaluate([shared, own], at: "2026-02-20T00:00:00Z")
        #expect(report.entitlements == [
            "basic": store(ID.basic, original: "3000", expires: "2026-03-10T00:00:00Z"),
            "premium": store(ID.pro, original: "4000", expires: "2026-02-10T00:00:00Z", inactive: .expired, ownership: .familyShared),
            "pro": store(ID.pro, original: "4000", expires: "2026-02-10T00:00:00Z", inactive: .expired, ownership: .familyShared),
        ])
    }

    @Test func aGroupTieBetweenEqualPurchasesGoesToTheEarlierOne() throws {
        let first = subscription("3001", original: "3000", product: ID.basic, purchased: "2026-02-01T00:00:00Z",
                                 expires: "2026-03-10T00:00:00Z")
        let second = subscription("4001", original: "4000", product: ID.pro, purchased: "2026-02-10T00:00:00Z",
                                  expires: "2026-03-10T00:00:00Z")
        let report = try evaluate([second, first], at: "2026-02-20T00:00:00Z")
        // The second, bought while the first held the group, is listed expired from its own purchase.
        #expect(report.entitlements == [
            "basic": store(ID.basic, original: "3000", expires: "2026-03-10T00:00:00Z"),
            "premium": store(ID.pro, original: "4000", expires: "2026-02-10T00:00:00Z", inactive: .expired),
            "pro": store(ID.pro, original: "4000", expires: "2026-02-10T00:00:00Z", inactive: .expired),
        ])
    }

    @Test(arguments: [(String?("g1"), String?("g1"), 1), ("g1", "g2", 2), (nil, nil, 2)])
    func withoutACatalogGroupTheTransactionsGroupCounts(newsGroup: String?, sportsGroup: String?, active: Int)
        throws {
        let news = subscription("6001", original: "6000", product: ID.news, purchased: "2026-02-01T00:00:00Z",
                                expires: "2026-03-01T00:00:00Z", group: newsGroup)
        let sports = subscription("7001", original: "7000", product: ID.sports, purchased: "2026-02-01T00:00:00Z",
                                  expires: "2026-03-02T00:00:00Z", group: sportsGroup)
        let report = try evaluate([news, sports], at: "2026-02-15T00:00:00Z")
        #expect(report.entitlements.values.filter(\.active).count == active)
        #expect(report.entitlements["sports"]?.active == true)
    }

    @Test func familySharingIsReported() throws {
        let shared = subscription("8001", original: "8000", purchased: "2026-02-01T00:00:00Z",
                                  expires: "2026-03-01T00:00:00Z", ownership: .familyShared)
        let report = try evaluate([shared], renewals: [renewal("8000")], at: "2026-02-15T00:00:00Z")
        #expect(report.entitlements["premium"] == store(
            ID.monthly, original: "8000", expires: "2026-03-01T00:00:00Z", willRenew: true, ownership: .familyShared))
    }

    @Test func theEnvironmentComesFromTheVerification() throws {
        let sandbox = subscription("9001", original: "9000", purchased: "2026-02-01T00:00:00Z",
                                   expires: "2026-02-01T00:05:00Z", environment: .sandbox)
        let report = try evaluate([sandbox], at: "2026-02-01T00:01:00Z")
        #expect(report.entitlements["premium"] == store(
            ID.monthly, original: "9000", expires: "2026-02-01T00:05:00Z", environment: .sandbox))
    }

    @Test func aSubscriptionWithoutExpiryGrantsNothing() throws {
        let broken = subscription("9101", original: "9100", purchased: "2026-02-01T00:00:00Z", expires: nil)
        #expect(try evaluate([broken], at: "2026-02-15T00:00:00Z").entitlements.isEmpty)
    }
}

// MARK: - Other product types, grants, precedence

@Suite struct EntitlementEvaluatorPurchaseTests {
    @Test func aNonRenewingPassLastsItsDuration() throws {
        let pass = purchase("n1", product: ID.passMonth, purchased: "2026-01-31T09:00:00Z")
        let during = try evaluate([pass], at: "2026-02-28T08:59:59Z")
        #expect(during.entitlements == [
            "premium": store(ID.passMonth, .nonRenewing, original: "n1", expires: "2026-02-28T09:00:00Z"),
        ])
        let after = try evaluate([pass], at: "2026-02-28T09:00:00Z")
        #expect(after.entitlements == [
            "premium": store(ID.passMonth, .nonRenewing, original: "n1", expires: "2026-02-28T09:00:00Z",
                             inactive: .expired),
        ])
    }

    @Test func nonRenewingPurchasesStack() throws {
        let purchases = [
            purchase("n3", product: ID.passWeek, purchased: "2026-04-01T00:00:00Z"),
            purchase("n2", product: ID.passMonth, purchased: "2026-01-15T00:00:00Z"),
            purchase("n1", product: ID.passMonth, purchased: "2026-01-01T00:00:00Z"),
        ]
        // The second month starts when the first ends.
        let stacked = try evaluate(purchases, at: "2026-01-20T00:00:00Z")
        #expect(stacked.entitlements["premium"] == store(
            ID.passMonth, .nonRenewing, original: "n2", expires: "2026-03-01T00:00:00Z"))
        // Before the first month ended, the second purchase did not exist yet.
        let early = try evaluate(purchases, at: "2026-01-10T00:00:00Z")
        #expect(early.entitlements["premium"]?.expiresAt == utc("2026-02-01T00:00:00Z"))
        // In the gap, the stack has run out.
        let gap = try evaluate(purchases, at: "2026-03-05T00:00:00Z")
        #expect(gap.entitlements["premium"] == store(
            ID.passMonth, .nonRenewing, original: "n2", expires: "2026-03-01T00:00:00Z", inactive: .expired))
        // A purchase after the gap starts at its own purchase time.
        let restarted = try evaluate(purchases, at: "2026-04-02T00:00:00Z")
        #expect(restarted.entitlements["premium"] == store(
            ID.passWeek, .nonRenewing, original: "n3", expires: "2026-04-08T00:00:00Z"))
    }

    @Test func aRefundedPassDoesNotStack() throws {
        let purchases = [
            purchase("n1", product: ID.passMonth, purchased: "2026-01-01T00:00:00Z", cancelled: "2026-01-05T00:00:00Z"),
            purchase("n2", product: ID.passMonth, purchased: "2026-01-10T00:00:00Z"),
        ]
        let report = try evaluate(purchases, at: "2026-01-12T00:00:00Z")
        #expect(report.entitlements["premium"] == store(
            ID.passMonth, .nonRenewing, original: "n2", expires: "2026-02-10T00:00:00Z"))
        let refundedOnly = try evaluate(purchases, at: "2026-01-06T00:00:00Z")
        #expect(refundedOnly.entitlements["premium"] == store(
            ID.passMonth, .nonRenewing, original: "n1", expires: "2026-01-05T00:00:00Z", inactive: .refunded))
        let beforeRefund = try evaluate(purchases, at: "2026-01-04T00:00:00Z")
        #expect(beforeRefund.entitlements["premium"]?.expiresAt == utc("2026-02-01T00:00:00Z"))
    }

    @Test func aTransactionSeenTwiceCountsOnce() throws {
        let pass = purchase("n1", product: ID.passMonth, purchased: "2026-01-01T00:00:00Z")
        let twice = try evaluate([pass, pass], at: "2026-01-20T00:00:00Z")
        #expect(twice.entitlements["premium"]?.expiresAt == utc("2026-02-01T00:00:00Z"))

        var refundedCopy = pass
        refundedCopy.transaction.cancellationDate = utc("2026-01-10T00:00:00Z")
        let refunded = try evaluate([refundedCopy, pass], at: "2026-01-20T00:00:00Z")
        #expect(refunded.entitlements["premium"]?.inactiveReason == .refunded)
    }

    @Test func aNonConsumableIsForever() throws {
        let lifetime = purchase("l1", product: ID.lifetime, purchased: "2026-01-01T00:00:00Z")
        let report = try evaluate([lifetime], at: "2046-01-01T00:00:00Z")
        let expected = store(ID.lifetime, .nonConsumable, original: "l1", expires: nil)
        #expect(report.entitlements == ["premium": expected, "themes": expected])
    }

    @Test func aRefundedNonConsumableEndsAtTheRefund() throws {
        let lifetime = purchase("l1", product: ID.lifetime, purchased: "2026-01-01T00:00:00Z",
                                cancelled: "2026-02-01T00:00:00Z")
        let before = try evaluate([lifetime], at: "2026-01-31T00:00:00Z")
        #expect(before.entitlements["themes"] == store(ID.lifetime, .nonConsumable, original: "l1", expires: nil))
        let after = try evaluate([lifetime], at: "2026-02-01T00:00:00Z")
        #expect(after.entitlements["themes"] == store(
            ID.lifetime, .nonConsumable, original: "l1", expires: "2026-02-01T00:00:00Z", inactive: .refunded))
    }

    @Test func aFamilySharedNonConsumable() throws {
        let shared = purchase("l2", product: ID.lifetime, purchased: "2026-01-01T00:00:00Z", ownership: .familyShared)
        let report = try evaluate([shared], at: "2026-03-01T00:00:00Z")
        #expect(report.entitlements["themes"] == store(
            ID.lifetime, .nonConsumable, original: "l2", expires: nil, ownership: .familyShared))
    }

    /// Family Sharing ended (Apple's REVOKE, a revocation date on a family-shared transaction): `revoked`, for every
    /// product type, from the revocation on; the purchaser's own refund stays `refunded`.
    @Test func aFamilySharedPurchaseTakenBackIsRevokedNotRefunded() throws {
        let revokedAt = "2026-01-15T00:00:00Z"
        let lifetime = purchase("l4", product: ID.lifetime, purchased: "2026-01-01T00:00:00Z", cancelled: revokedAt, ownership: .familyShared)
        let pass = purchase("n4", product: ID.passWeek, purchased: "2026-01-10T00:00:00Z", cancelled: revokedAt, ownership: .familyShared)
        let monthly = subscription("s4", original: "s4", purchased: "2026-01-01T00:00:00Z", expires: "2026-02-01T00:00:00Z",
                                   cancelled: revokedAt, ownership: .familyShared)
        let news = subscription("s5", original: "s5", product: ID.news, purchased: "2026-01-01T00:00:00Z", expires: "2026-02-01T00:00:00Z",
                                cancelled: revokedAt)
        let before = try evaluate([lifetime, pass, monthly, news], at: "2026-01-14T00:00:00Z")
        #expect(before.entitlements.values.allSatisfy { $0.active })
        let after = try evaluate([lifetime, pass, monthly, news], at: revokedAt)
        #expect(after.entitlements["themes"] == store(
            ID.lifetime, .nonConsumable, original: "l4", expires: revokedAt, inactive: .revoked, ownership: .familyShared))
        #expect(after.entitlements["news"] == store(ID.news, original: "s5", expires: revokedAt, inactive: .refunded))
        let premium = try #require(after.entitlements["premium"])
        #expect(premium.inactiveReason == .revoked && premium.expiresAt == utc(revokedAt))
        let claims = EntitlementEvaluator.claims(transactions: [lifetime, pass, monthly], renewals: [], grants: [],
                                                 catalog: try catalog(), at: utc(revokedAt))
        #expect(claims["premium"]?.count == 3)
        #expect(claims["premium"]?.allSatisfy { $0.entitlement.inactiveReason == .revoked } == true)
    }

    @Test func anOwnPurchaseOutranksAFamilySharedOne() throws {
        let shared = purchase("l2", product: ID.lifetime, purchased: "2026-01-01T00:00:00Z", ownership: .familyShared)
        let own = purchase("l3", product: ID.lifetime, purchased: "2026-02-01T00:00:00Z")
        let report = try evaluate([shared, own], at: "2026-03-01T00:00:00Z")
        #expect(report.entitlements["themes"] == store(ID.lifetime, .nonConsumable, original: "l3", expires: nil))
    }

    @Test func consumablesYieldNoEntitlements() throws {
        let coins = purchase("c1", product: ID.coins, purchased: "2026-01-01T00:00:00Z")
        let report = try evaluate([coins], at: "2026-01-02T00:00:00Z")
        #expect(report.entitlements.isEmpty)
        #expect(report.unknownProducts.isEmpty)
    }

    @Test func unknownProductsGrantNothingAndAreReported() throws {
        let gone = purchase("u1", product: "com.example.gone", purchased: "2026-01-01T00:00:00Z")
        let goneAgain = purchase("u2", product: "com.example.gone", purchased: "2026-01-02T00:00:00Z")
        let other = subscription("u3", original: "u3", product: "com.example.retired", purchased: "2026-01-01T00:00:00Z",
                                 expires: "2026-12-01T00:00:00Z")
        let future = purchase("u4", product: "com.example.future", purchased: "2026-06-01T00:00:00Z")
        let report = try evaluate([gone, goneAgain, other, future], at: "2026-02-01T00:00:00Z")
        #expect(report.entitlements.isEmpty)
        #expect(report.unknownProducts == ["com.example.gone", "com.example.retired"])
    }

    @Test func grantsFollowCreationExpiryAndRevocation() throws {
        let grants = [
            grant("g1", "lifetime", created: "2026-01-01T00:00:00Z"),
            grant("g2", "dated", created: "2026-01-01T00:00:00Z", expires: "2026-03-01T00:00:00Z"),
            grant("g3", "ran_out", created: "2026-01-01T00:00:00Z", expires: "2026-01-15T00:00:00Z"),
            grant("g4", "revoked", created: "2026-01-01T00:00:00Z", revoked: "2026-01-20T00:00:00Z"),
            grant("g5", "revoked_later", created: "2026-01-01T00:00:00Z", revoked: "2026-03-01T00:00:00Z"),
            grant("g6", "not_yet", created: "2026-02-02T00:00:00Z"),
            grant("g7", "ran_out_then_revoked", created: "2026-01-01T00:00:00Z", expires: "2026-01-10T00:00:00Z",
                  revoked: "2026-01-12T00:00:00Z"),
        ]
        let report = try evaluate(grants: grants, at: "2026-02-01T00:00:00Z")
        #expect(report.entitlements == [
            "lifetime": granted("g1", expires: nil),
            "dated": granted("g2", expires: "2026-03-01T00:00:00Z"),
            "ran_out": granted("g3", expires: "2026-01-15T00:00:00Z", inactive: .expired),
            "revoked": granted("g4", expires: "2026-01-20T00:00:00Z", inactive: .revoked),
            "revoked_later": granted("g5", expires: nil),
            "ran_out_then_revoked": granted("g7", expires: "2026-01-10T00:00:00Z", inactive: .expired),
        ])
    }

    @Test func aLongerGrantOutlastsASubscription() throws {
        let report = try evaluate(monthlyChain, renewals: [renewal("1000")],
                                  grants: [grant("g1", created: "2026-03-01T00:00:00Z", expires: "2026-06-01T00:00:00Z")],
                                  at: "2026-03-15T00:00:00Z")
        #expect(report.entitlements["premium"] == granted("g1", expires: "2026-06-01T00:00:00Z"))
    }

    @Test func aGrantNeverShortensAStorePurchase() throws {
        let shorter = try evaluate(
            monthlyChain, renewals: [renewal("1000")],
            grants: [grant("g1", created: "2026-03-01T00:00:00Z", expires: "2026-03-20T00:00:00Z")],
            at: "2026-03-15T00:00:00Z")
        #expect(shorter.entitlements["premium"] == store(
            ID.monthly, original: "1000", expires: "2026-04-10T12:00:00Z", willRenew: true))

        let revoked = try evaluate(
            monthlyChain, grants: [grant("g1", created: "2026-03-01T00:00:00Z", revoked: "2026-03-02T00:00:00Z")],
            at: "2026-03-15T00:00:00Z")
        #expect(revoked.entitlements["premium"]?.source == store(ID.monthly, original: "1000", expires: nil).source)

        let lifetime = purchase("l1", product: ID.lifetime, purchased: "2026-01-01T00:00:00Z")
        let tie = try evaluate([lifetime], grants: [grant("g1", created: "2025-01-01T00:00:00Z")],
                               at: "2026-03-15T00:00:00Z")
        #expect(tie.entitlements["premium"] == store(ID.lifetime, .nonConsumable, original: "l1", expires: nil))
    }

    @Test func aLifetimeGrantOutlastsAnySubscription() throws {
        let report = try evaluate(monthlyChain, renewals: [renewal("1000")],
                                  grants: [grant("g1", created: "2026-03-01T00:00:00Z")], at: "2026-03-15T00:00:00Z")
        #expect(report.entitlements["premium"] == granted("g1", expires: nil))
    }

    @Test func amongEndedSourcesTheLatestEndIsShown() throws {
        let report = try evaluate(monthlyChain,
                                  grants: [grant("g1", created: "2026-01-01T00:00:00Z", expires: "2026-05-01T00:00:00Z")],
                                  at: "2026-06-01T00:00:00Z")
        #expect(report.entitlements["premium"] == granted("g1", expires: "2026-05-01T00:00:00Z", inactive: .expired))

        let refundedLater = try evaluate(
            monthlyChain + [purchase("l1", product: ID.lifetime, purchased: "2026-01-01T00:00:00Z",
                                     cancelled: "2026-04-20T00:00:00Z")],
            at: "2026-06-01T00:00:00Z")
        #expect(refundedLater.entitlements["premium"]?.inactiveReason == .refunded)
        #expect(refundedLater.entitlements["themes"]?.inactiveReason == .refunded)
    }
}

// MARK: - JSON

@Suite struct EntitlementEvaluatorJSONTests {
    @Test func theDocumentMatchesTheAPIExample() throws {
        let transaction = OwnedTransaction(
            StoreTransaction(transactionID: "1000000456", originalTransactionID: "1000000123",
                             productID: ID.monthly, purchaseDate: utc("2026-11-22T01:20:00Z"),
                             expiresDate: utc("2026-12-22T01:20:00Z")),
            environment: .production)
        let report = try evaluate([transaction], renewals: [renewal("1000000123")], at: "2026-11-22T01:20:00Z")
        let document = EntitlementsDocument(userID: "u1", report: report, consumables: ["coins": 100])
        // The example API.md shows (with `unknown_products`, which API.md lists as built), as the served OpenAPI document carries it.
        let openAPI = try JSONValue(json: String(decoding: PackageResources.openapi_json, as: UTF8.self))
        guard case .object(let root) = openAPI, case .object(let components)? = root["components"],
              case .object(let schemas)? = components["schemas"], case .object(let response)? = schemas["EntitlementsResponse"],
              case .array(let examples)? = response["examples"], let example = examples.first else {
            Issue.record("the OpenAPI document has no EntitlementsResponse example")
            return
        }
        #expect(try JSONValue(encoding: document) == example)
    }

    @Test func lifetimeIsNullAndInactiveCarriesAReason() throws {
        let lifetime = try JSONValue(encoding: store(ID.lifetime, .nonConsumable, original: "l1", expires: nil))
        guard case .object(let members) = lifetime else { Issue.record("not an object"); return }
        #expect(members["expires_at"] == .null)
        #expect(members["inactive_reason"] == nil)

        let refunded = try JSONValue(encoding: store(ID.lifetime, .nonConsumable, original: "l1",
                                                     expires: "2026-02-01T00:00:00Z", inactive: .refunded))
        #expect(refunded.keys == [
            "active", "source", "product_id", "product_type", "expires_at", "environment", "will_renew",
            "in_grace_period", "in_billing_retry", "ownership", "original_transaction_id", "inactive_reason",
        ])
        guard case .object(let refundedMembers) = refunded else { Issue.record("not an object"); return }
        #expect(refundedMembers["active"] == .bool(false))
        #expect(refundedMembers["inactive_reason"] == .string("refunded"))
        #expect(refundedMembers["expires_at"] == .string("2026-02-01T00:00:00Z"))
    }

    @Test func grantsShowTheirIdAndReasonInstead() throws {
        let active = try JSONValue(encoding: granted("g1", expires: nil))
        #expect(active == (try JSONValue(json: """
            {"active": true, "source": "grant", "grant_id": "g1", "reason": "support", "expires_at": null}
            """)))
        let expired = try JSONValue(encoding: granted("g1", expires: "2026-05-01T00:00:00Z", inactive: .expired))
        #expect(expired == (try JSONValue(json: """
            {"active": false, "source": "grant", "grant_id": "g1", "reason": "support",
             "expires_at": "2026-05-01T00:00:00Z", "inactive_reason": "expired"}
            """)))
        #expect(try JSONValue(encoding: Entitlement(expiresAt: nil, inactiveReason: .billingRetryEnded,
                                                    source: .grant(id: "g", reason: "r"))).keys
            .contains("inactive_reason"))
    }

    @Test func grantsCodeAsTheAPIsGrantDocument() throws {
        let revoked = grant("g9", "premium", created: "2026-01-01T00:00:00Z", expires: "2026-02-01T00:00:00Z",
                            revoked: "2026-01-15T00:00:00Z")
        let json = try JSONEncoder().encode(revoked)
        #expect(try JSONValue(encoding: revoked) == JSONValue(json: """
            {"grant_id": "g9", "user_id": "u1", "entitlement": "premium", "created_at": "2026-01-01T00:00:00Z",
             "expires_at": "2026-02-01T00:00:00Z", "revoked_at": "2026-01-15T00:00:00Z", "reason": "support"}
            """))
        #expect(try JSONDecoder().decode(Grant.self, from: json) == revoked)

        let lifetime = grant("g10", created: "2026-01-01T00:00:00Z")
        guard case .object(let members) = try JSONValue(encoding: lifetime) else { Issue.record("not an object"); return }
        #expect(members["expires_at"] == .null)
        #expect(members["revoked_at"] == .null)
        #expect(try JSONDecoder().decode(Grant.self, from: JSONEncoder().encode(lifetime)) == lifetime)

        #expect(throws: DecodingError.self) {
            try JSONDecoder().decode(Grant.self, from: Data("""
                {"grant_id": "g", "user_id": "u", "entitlement": "e", "created_at": "yesterday", "reason": "r"}
                """.utf8))
        }
    }
}
