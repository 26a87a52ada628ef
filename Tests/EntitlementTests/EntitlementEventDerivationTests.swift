import Foundation
import Testing
@testable import EntitlementModel

/// Event types derived from the before and after of an evaluation: on the real receipts replayed one
/// transaction at a time, and on the changes Apple's renewal info and the admin make.
@Suite struct EntitlementEventDerivationTests {
    private static let start = Date(timeIntervalSince1970: 1_767_225_600)  // 2026-01-01T00:00:00Z
    private static let catalog = try! Catalog(products: [
        Product(productID: "monthly", type: .autoRenewable, entitlements: ["premium"], subscriptionGroup: "g"),
        Product(productID: "annual", type: .autoRenewable, entitlements: ["premium"], subscriptionGroup: "g"),
        Product(productID: "basic", type: .autoRenewable, entitlements: ["basic"], subscriptionGroup: "g"),
        Product(productID: "lifetime", type: .nonConsumable, entitlements: ["pro"]),
        Product(productID: "pass", type: .nonRenewing, entitlements: ["pass"], duration: ISODuration(months: 1)),
        Product(productID: "coins", type: .consumable, currency: "coins", amount: 100),
    ])

    private static func state(_ transactions: [StoreTransaction], renewals: [RenewalInfo] = [], grants: [Grant] = [],
                              consumables: [String: Int] = [:], catalog: Catalog = catalog, at: Date) -> EntitlementState {
        let report = EntitlementEvaluator.evaluate(
            transactions: transactions.map { OwnedTransaction($0, environment: .sandbox) }, renewals: renewals,
            grants: grants, catalog: catalog, at: at)
        return EntitlementState(entitlements: report.entitlements, consumables: consumables)
    }

    private static func appStore(_ transactions: [StoreTransaction], new: [StoreTransaction]? = nil, reversed: Set<String> = [],
                                 notification: String? = nil, subtype: String? = nil) -> EntitlementChangeCause {
        .appStore(AppStoreReport(transactions: transactions.map { OwnedTransaction($0, environment: .sandbox) }, newTransactionIDs: Set((new ?? transactions).map(\.transactionID)),
                                 reversedTransactionIDs: reversed, notificationType: notification, subtype: subtype,
                                 productTypes: Dictionary(uniqueKeysWithValues: catalog.products.map { ($0.productID, $0.type) })))
    }

    /// Time alone, with `transactions` bought by then.
    private static func time(_ transactions: [StoreTransaction]) -> EntitlementChangeCause {
        .timePassed(transactions: transactions.map { OwnedTransaction($0, environment: .sandbox) })
    }

    private static func subscription(_ id: String, chain: String = "100", product: String = "monthly", month: Int,
                                     cancelled: Date? = nil, ownership: Ownership = .purchased) -> StoreTransaction {
        let purchased = ISODuration(months: month).adding(to: start)
        return StoreTransaction(transactionID: id, originalTransactionID: chain, productID: product, purchaseDate: purchased,
                                expiresDate: ISODuration(months: 1).adding(to: purchased), cancellationDate: cancelled,
                                ownership: ownership)
    }

    // MARK: - Real receipts, replayed

    /// Every accepted receipt replayed in purchase order: each transaction that changes what the user holds
    /// yields exactly one event, of a purchase type for a first purchase and `renewal` within a subscription.
    @Test(arguments: FixtureEntitlementsTests.accepted)
    func replayedReceiptsYieldPurchaseEvents(name: String) throws {
        let response = try AppStoreResponse(jsonData: try Fixtures.data(name))
        let all = EntitlementEvaluator.distinct(response.transactions().map { OwnedTransaction($0, environment: .sandbox) })
            .map(\.transaction).sorted { $0.wasBought(before: $1) }
        let catalog = try FixtureEntitlementsTests.catalog(for: all)
        var seenChains = Set<String>()
        for (index, transaction) in all.enumerated() {
            let at = transaction.purchaseDate.addingTimeInterval(1)
            let before = Self.state(Array(all[..<index]), catalog: catalog, at: at)
            let after = Self.state(Array(all[...index]), catalog: catalog, at: at)
            let event = DerivedEntitlementEvent.derive(before: before, after: after, cause: Self.appStore([transaction]))
            let note = Comment(rawValue: "\(name) \(transaction.transactionID)")
            #expect((event == nil) == (before == after), note)
            guard let event, let product = catalog.product(transaction.productID) else { continue }
            let allowed: Set<EntitlementEventType>
            switch product.type {
            case .autoRenewable:
                allowed = seenChains.contains(transaction.originalTransactionID)
                    ? [.renewal, .productChange, .refund, .expiration]
                    : [.initialPurchase, .productChange, .renewal, .refund, .expiration]
                seenChains.insert(transaction.originalTransactionID)
            case .nonConsumable: allowed = [.nonConsumablePurchase, .refund]
            case .nonRenewing: allowed = [.nonRenewingPurchase, .refund, .expiration]
            case .consumable: allowed = [.consumablePurchase]
            }
            #expect(allowed.contains(event.type), note)
        }
    }

    @Test func theRefundedReceiptNamesARefund() throws {
        let response = try AppStoreResponse(jsonData: try Fixtures.data("verifyreceipt_status0_refunded_sandbox_monza.json"))
        let refunded = response.transactions()
        let catalog = try FixtureEntitlementsTests.catalog(for: refunded)
        let cancelled = try #require(refunded.compactMap(\.cancellationDate).min())
        let unrefunded = refunded.map { var t = $0; t.cancellationDate = nil; return t }
        let at = cancelled.addingTimeInterval(1)
        let event = DerivedEntitlementEvent.derive(
            before: Self.state(unrefunded, catalog: catalog, at: at), after: Self.state(refunded, catalog: catalog, at: at),
            cause: Self.appStore(refunded, new: []))
        #expect(event?.type == .refund)
        #expect(event?.originalTransactionID == refunded.first { $0.cancellationDate != nil }?.originalTransactionID)
    }

    @Test func theCrossgradeReceiptNamesAProductChange() throws {
        let response = try AppStoreResponse(jsonData: try Fixtures.data("verifyreceipt_status0_autorenew_monthly_to_annual_sandbox_revenuecat.json"))
        let all = response.transactions().sorted { $0.purchaseDate < $1.purchaseDate }
        let catalog = try FixtureEntitlementsTests.catalog(for: all)
        let products = all.map(\.productID)
        let switchIndex = try #require(products.indices.dropFirst().first { products[$0] != products[$0 - 1] })
        let at = all[switchIndex].purchaseDate.addingTimeInterval(1)
        let event = DerivedEntitlementEvent.derive(
            before: Self.state(Array(all[..<switchIndex]), catalog: catalog, at: at),
            after: Self.state(Array(all[...switchIndex]), catalog: catalog, at: at), cause: Self.appStore([all[switchIndex]]))
        #expect(event?.type == .productChange)
        #expect(event?.productID == all[switchIndex].productID)
    }

    // MARK: - Subscriptions

    @Test func firstPurchaseRenewalAndLapsedRenewal() {
        let first = Self.subscription("100", month: 0), second = Self.subscription("101", month: 1)
        let at1 = Self.start.addingTimeInterval(60)
        let initial = DerivedEntitlementEvent.derive(before: EntitlementState(), after: Self.state([first], at: at1), cause: Self.appStore([first]))
        #expect(initial == DerivedEntitlementEvent(type: .initialPurchase, productID: "monthly", transactionID: "100",
                                                   originalTransactionID: "100", environment: .sandbox))
        let at2 = second.purchaseDate.addingTimeInterval(60)
        #expect(DerivedEntitlementEvent.derive(before: Self.state([first], at: at2), after: Self.state([first, second], at: at2),
                                               cause: Self.appStore([second]))?.type == .renewal)
        // A month's gap: the subscription had lapsed, and comes back.
        let late = Self.subscription("102", month: 3)
        let at3 = late.purchaseDate.addingTimeInterval(60)
        #expect(DerivedEntitlementEvent.derive(before: Self.state([first, second], at: at3), after: Self.state([first, second, late], at: at3),
                                               cause: Self.appStore([late]))?.type == .renewal)
    }

    /// A subscription of its own (another group's, unlocking the same) that now shows the entitlement is bought,
    /// not a change of product: only the same subscription changes product.
    @Test func aSubscriptionOfItsOwnTakingOverIsAPurchase() throws {
        let catalog = try Catalog(products: Self.catalog.products
            + [Product(productID: "family", type: .autoRenewable, entitlements: ["premium"], subscriptionGroup: "h")])
        let first = Self.subscription("100", month: 0)
        var other = Self.subscription("200", chain: "200", product: "family", month: 0)
        other.purchaseDate = first.purchaseDate.addingTimeInterval(86_400)
        other.expiresDate = first.expiresDate!.addingTimeInterval(86_400)
        let at = other.purchaseDate.addingTimeInterval(60)
        let event = DerivedEntitlementEvent.derive(before: Self.state([first], catalog: catalog, at: at),
                                                   after: Self.state([first, other], catalog: catalog, at: at), cause: Self.appStore([other]))
        #expect(event?.type == .initialPurchase && event?.productID == "family", "\(String(describing: event))")
    }

    @Test func renewalInfoChangesNameCancellationUncancellationAndBillingIssue() {
        let first = Self.subscription("100", month: 0)
        let at = Self.start.addingTimeInterval(60)
        let renewing = RenewalInfo(originalTransactionID: "100", productID: "monthly", willRenew: true)
        var off = renewing
        off.willRenew = false
        var retrying = renewing
        retrying.isInBillingRetryPeriod = true
        retrying.gracePeriodExpiresDate = first.expiresDate!.addingTimeInterval(86_400 * 6)
        func type(_ a: RenewalInfo, _ b: RenewalInfo, at: Date = at) -> EntitlementEventType? {
            DerivedEntitlementEvent.derive(before: Self.state([first], renewals: [a], at: at), after: Self.state([first], renewals: [b], at: at),
                                           cause: Self.appStore([first], new: []))?.type
        }
        #expect(type(renewing, off) == .cancellation)
        #expect(type(off, renewing) == .uncancellation)
        #expect(type(renewing, renewing) == nil)
        // Past the end (its expiration already sent), Apple's word that auto-renew is off (its EXPIRED notification)
        // or on again is that, not a second expiration.
        let ended = first.expiresDate!.addingTimeInterval(60)
        #expect(type(renewing, off, at: ended) == .cancellation)
        #expect(type(off, renewing, at: ended) == .uncancellation)
        // Past the expiry, inside the grace period Apple gave: billing issue.
        #expect(type(renewing, retrying, at: first.expiresDate!.addingTimeInterval(60)) == .billingIssue)
        // A renewal that failed with no grace period (DID_FAIL_TO_RENEW): access ends, and the event says why,
        // whether or not its expiration was already sent.
        var retryingNoGrace = renewing
        retryingNoGrace.isInBillingRetryPeriod = true
        let lapsed = first.expiresDate!.addingTimeInterval(60)
        #expect(type(renewing, retryingNoGrace, at: lapsed) == .billingIssue)
        #expect(type(off, retryingNoGrace, at: lapsed) == .billingIssue)
        #expect(Self.state([first], renewals: [retryingNoGrace], at: lapsed).entitlements["premium"]?.active == false)
        // Billing retry already under way, then over: an expiration, not a second billing issue.
        #expect(type(retryingNoGrace, off, at: lapsed) == .expiration)
        // The grace period over with billing retry going on: an expiration.
        let graceOver = retrying.gracePeriodExpiresDate!.addingTimeInterval(60)
        #expect(DerivedEntitlementEvent.derive(before: Self.state([first], renewals: [retrying], at: first.expiresDate!.addingTimeInterval(60)),
                                               after: Self.state([first], renewals: [retrying], at: graceOver), cause: Self.time([first]))?.type == .expiration)
    }

    @Test func refundRevokeAndRefundReversed() {
        let refundedAt = Self.start.addingTimeInterval(3_600)
        let at = refundedAt.addingTimeInterval(60)
        let bought = Self.subscription("100", month: 0)
        let refunded = Self.subscription("100", month: 0, cancelled: refundedAt)
        #expect(DerivedEntitlementEvent.derive(before: Self.state([bought], at: at), after: Self.state([refunded], at: at),
                                               cause: Self.appStore([refunded], new: []))?.type == .refund)
        #expect(DerivedEntitlementEvent.derive(before: Self.state([refunded], at: at), after: Self.state([bought], at: at),
                                               cause: Self.appStore([bought], new: []))?.type == .refundReversed)
        let shared = Self.subscription("100", month: 0, ownership: .familyShared)
        let sharedRevoked = Self.subscription("100", month: 0, cancelled: refundedAt, ownership: .familyShared)
        #expect(DerivedEntitlementEvent.derive(before: Self.state([shared], at: at), after: Self.state([sharedRevoked], at: at),
                                               cause: Self.appStore([sharedRevoked], new: []))?.type == .revoke)
    }

    /// Family Sharing ended shows as `revoked` and is a `revoke` whatever the notification, from an active
    /// entitlement or on a purchase first seen revoked; given back, it is `refund_reversed`. A grant's revocation
    /// stays `grant_revoked`.
    @Test func familySharingEndedIsARevokeNotARefund() throws {
        let revokedAt = Self.start.addingTimeInterval(3_600)
        let at = revokedAt.addingTimeInterval(60)
        let shared = Self.subscription("100", month: 0, ownership: .familyShared)
        let revoked = Self.subscription("100", month: 0, cancelled: revokedAt, ownership: .familyShared)
        let after = Self.state([revoked], at: at)
        #expect(after.entitlements["premium"]?.inactiveReason == .revoked)
        for notification in [nil, "REVOKE", "REFUND"] {
            #expect(DerivedEntitlementEvent.derive(before: Self.state([shared], at: at), after: after,
                                                   cause: Self.appStore([revoked], new: [], notification: notification))?.type == .revoke)
        }
        #expect(DerivedEntitlementEvent.derive(before: EntitlementState(), after: after, cause: Self.appStore([revoked]))?.type == .revoke)
        #expect(DerivedEntitlementEvent.derive(before: after, after: Self.state([shared], at: at),
                                               cause: Self.appStore([shared], new: []))?.type == .refundReversed)

        let lifetime = StoreTransaction(transactionID: "300", originalTransactionID: "300", productID: "lifetime", purchaseDate: Self.start,
                                        ownership: .familyShared)
        var lifetimeRevoked = lifetime
        lifetimeRevoked.cancellationDate = revokedAt
        let event = try #require(DerivedEntitlementEvent.derive(before: Self.state([lifetime], at: at), after: Self.state([lifetimeRevoked], at: at),
                                                                cause: Self.appStore([lifetimeRevoked], new: [], notification: "REVOKE")))
        #expect(event.type == .revoke && event.productID == "lifetime" && event.transactionID == "300")

        let grant = Grant(id: "g1", userID: "u1", entitlement: "premium", createdAt: Self.start, expiresAt: nil, revokedAt: nil, reason: "r")
        var grantRevoked = grant
        grantRevoked.revokedAt = revokedAt
        #expect(Self.state([], grants: [grantRevoked], at: at).entitlements["premium"]?.inactiveReason == .revoked)
        #expect(DerivedEntitlementEvent.derive(before: Self.state([], grants: [grant], at: at), after: Self.state([], grants: [grantRevoked], at: at),
                                               cause: Self.appStore([], new: []))?.type == .grantRevoked)
    }

    @Test func aCatalogChangeNamesItselfAndTheProduct() throws {
        let at = Self.start.addingTimeInterval(60)
        let lifetime = StoreTransaction(transactionID: "300", originalTransactionID: "300", productID: "lifetime", purchaseDate: Self.start)
        let more = try Catalog(products: Self.catalog.products.map {
            $0.productID == "lifetime" ? try Product(productID: "lifetime", type: .nonConsumable, entitlements: ["pro", "extras"]) : $0
        })
        let before = Self.state([lifetime], at: at)
        let event = DerivedEntitlementEvent.derive(before: before, after: Self.state([lifetime], catalog: more, at: at),
                                                   cause: .catalogChanged(productID: "lifetime"))
        #expect(event == DerivedEntitlementEvent(type: .catalogChange, productID: "lifetime"))
        #expect(DerivedEntitlementEvent.derive(before: before, after: before, cause: .catalogChanged(productID: "lifetime")) == nil)
    }

    @Test func upgradeWithinTheGroupIsAProductChange() {
        let monthly = Self.subscription("100", month: 0)
        var upgraded = monthly
        upgraded.isUpgraded = true
        upgraded.cancellationDate = Self.start.addingTimeInterval(3_600)
        let annual = StoreTransaction(transactionID: "200", originalTransactionID: "100", productID: "annual",
                                      purchaseDate: Self.start.addingTimeInterval(3_600),
                                      expiresDate: ISODuration(years: 1).adding(to: Self.start))
        let at = Self.start.addingTimeInterval(7_200)
        let event = DerivedEntitlementEvent.derive(before: Self.state([monthly], at: at), after: Self.state([upgraded, annual], at: at),
                                                   cause: Self.appStore([upgraded, annual], new: [annual]))
        #expect(event?.type == .productChange)
        #expect(event?.productID == "annual" && event?.transactionID == "200")
    }

    /// Two subscriptions of one group (two Apple accounts): the one in force is refunded (or, for a family member,
    /// revoked) and the other takes over. What happened is the refund of the first, not a product change, whether
    /// Apple's refund takes effect at once or at a date ahead (time alone then brings it in).
    @Test(arguments: [Ownership.purchased, .familyShared])
    func aRefundThatHandsTheGroupToAnotherPurchaseIsARefund(ownership: Ownership) throws {
        let monthly = Self.subscription("100", chain: "100", month: 0, ownership: ownership)
        let annual = StoreTransaction(transactionID: "300", originalTransactionID: "300", productID: "annual", purchaseDate: Self.start,
                                      expiresDate: ISODuration(years: 1).adding(to: Self.start))
        let at = Self.start.addingTimeInterval(7_200)
        let before = Self.state([monthly, annual], at: at)
        let winner = try #require(before.entitlements["premium"].flatMap { entitlement -> StoreTransaction? in
            guard case .appStore(let purchase) = entitlement.source else { return nil }
            return purchase.originalTransactionID == "100" ? monthly : annual
        })
        let other = winner.transactionID == "100" ? annual : monthly
        var refunded = winner
        refunded.cancellationDate = at.addingTimeInterval(-60)
        let after = Self.state([refunded, other], at: at)
        let expected = winner.ownership == .familyShared ? EntitlementEventType.revoke : .refund
        let event = DerivedEntitlementEvent.derive(before: before, after: after, cause: Self.appStore([refunded], new: [], notification: "REFUND"))
        #expect(event?.type == expected && event?.transactionID == winner.transactionID && event?.productID == winner.productID)

        // Refunded at a date ahead: in force until then, and time alone brings the refund in.
        var ahead = winner
        ahead.cancellationDate = at.addingTimeInterval(60)
        let passed = DerivedEntitlementEvent.derive(before: Self.state([ahead, other], at: at), after: Self.state([ahead, other], at: at.addingTimeInterval(120)),
                                                    cause: Self.time([ahead, other]))
        #expect(passed?.type == expected && passed?.transactionID == winner.transactionID)
    }

    /// Two purchases of one product (two subscriptions, two stacked passes, a lifetime bought twice): refunding the
    /// one shown is a refund about it, not an event about the other that takes over.
    @Test func aRefundHandingAProductToItsOtherPurchaseIsARefundOfTheOneRefunded() {
        let at = Self.start.addingTimeInterval(86_400)
        let short = Self.subscription("10", chain: "10", month: 0)
        var long = Self.subscription("20", chain: "20", month: 0)
        long.expiresDate = ISODuration(months: 2).adding(to: Self.start)
        var refundedLong = long
        refundedLong.cancellationDate = at.addingTimeInterval(-60)
        let subscriptions = DerivedEntitlementEvent.derive(before: Self.state([short, long], at: at), after: Self.state([short, refundedLong], at: at),
                                                           cause: Self.appStore([refundedLong], new: [], notification: "REFUND"))
        #expect(subscriptions?.type == .refund && subscriptions?.originalTransactionID == "20" && subscriptions?.transactionID == "20")

        let first = StoreTransaction(transactionID: "5", originalTransactionID: "5", productID: "lifetime", purchaseDate: Self.start)
        let second = StoreTransaction(transactionID: "7", originalTransactionID: "7", productID: "lifetime", purchaseDate: Self.start.addingTimeInterval(60))
        let before = Self.state([first, second], at: at)
        let shown: String? = if case .appStore(let purchase)? = before.entitlements["pro"]?.source { purchase.originalTransactionID } else { nil }
        var refunded = shown == "5" ? first : second
        refunded.cancellationDate = at.addingTimeInterval(-60)
        let other = shown == "5" ? second : first
        let lifetime = DerivedEntitlementEvent.derive(before: before, after: Self.state([refunded, other], at: at),
                                                      cause: Self.appStore([refunded], new: [], notification: "REFUND"))
        #expect(lifetime?.type == .refund && lifetime?.originalTransactionID == shown, "\(String(describing: lifetime))")

    }

    /// The same non-consumable bought twice (two purchases): when the one shown changes, the event is a purchase of
    /// it, not a renewal.
    @Test func anotherPurchaseOfTheSameProductIsAPurchase() {
        let at = Self.start.addingTimeInterval(600)
        let later = StoreTransaction(transactionID: "7", originalTransactionID: "7", productID: "lifetime", purchaseDate: Self.start.addingTimeInterval(300))
        let earlier = StoreTransaction(transactionID: "5", originalTransactionID: "5", productID: "lifetime", purchaseDate: Self.start)
        // Whichever order they come in, the purchase shown changes one way at least; each change is a purchase.
        let events = [(later, earlier), (earlier, later)].compactMap { first, second in
            DerivedEntitlementEvent.derive(before: Self.state([first], at: at), after: Self.state([first, second], at: at),
                                           cause: Self.appStore([second]))
        }
        #expect(!events.isEmpty && events.allSatisfy { $0.type == .nonConsumablePurchase }, "\(events)")
    }

    /// A subscription refunded while a shorter grant of its entitlement runs: the grant holds the entitlement on, and
    /// the event is the refund of the subscription; Apple's reversal brings it back as a `refund_reversed`. Its end
    /// coming early while a grant holds on is an expiration.
    @Test func aPurchaseGivingWayToAGrantIsItsRefundOrItsEnd() {
        let at = Self.start.addingTimeInterval(86_400)
        let grant = Grant(id: "g1", userID: "u1", entitlement: "premium", createdAt: Self.start,
                          expiresAt: Self.start.addingTimeInterval(7 * 86_400), revokedAt: nil, reason: "r")
        let monthly = Self.subscription("100", month: 0), refunded = Self.subscription("100", month: 0, cancelled: at)
        let subscribed = Self.state([monthly], grants: [grant], at: at), granted = Self.state([refunded], grants: [grant], at: at)
        #expect(granted.entitlements["premium"]?.active == true)
        let refund = DerivedEntitlementEvent.derive(before: subscribed, after: granted,
                                                    cause: Self.appStore([refunded], new: [], notification: "REFUND"))
        #expect(refund == DerivedEntitlementEvent(type: .refund, productID: "monthly", transactionID: "100", originalTransactionID: "100",
                                                  environment: .sandbox))
        let reversal = DerivedEntitlementEvent.derive(before: granted, after: subscribed,
                                                      cause: Self.appStore([monthly], new: [], notification: "REFUND_REVERSED"))
        #expect(reversal?.type == .refundReversed && reversal?.transactionID == "100", "\(String(describing: reversal))")
        // Cut short by Apple without a refund (an EXPIRED notification, say): the grant holds on; an expiration.
        var cut = monthly
        cut.expiresDate = at.addingTimeInterval(-1)
        let ended = DerivedEntitlementEvent.derive(before: subscribed, after: Self.state([cut], grants: [grant], at: at),
                                                   cause: Self.appStore([cut], new: [], notification: "EXPIRED"))
        #expect(ended?.type == .expiration && ended?.productID == "monthly", "\(String(describing: ended))")
    }

    /// The first of two stacked passes refunded: the entitlement shows the second, shortened; the refund is about the first.
    @Test func aStackedPassRefundedIsTheRefundOfThatPass() {
        let at = Self.start.addingTimeInterval(60)
        let pass = StoreTransaction(transactionID: "2", originalTransactionID: "2", productID: "pass", purchaseDate: Self.start)
        let pass2 = StoreTransaction(transactionID: "3", originalTransactionID: "3", productID: "pass", purchaseDate: Self.start.addingTimeInterval(30))
        var refunded = pass
        refunded.cancellationDate = at
        let event = DerivedEntitlementEvent.derive(before: Self.state([pass, pass2], at: at), after: Self.state([refunded, pass2], at: at),
                                                   cause: Self.appStore([refunded], new: [], notification: "REFUND"))
        #expect(event == DerivedEntitlementEvent(type: .refund, productID: "pass", transactionID: "2", originalTransactionID: "2",
                                                 environment: .sandbox))
    }

    // MARK: - Other products

    @Test func lifetimePassAndConsumablePurchases() {
        let at = Self.start.addingTimeInterval(60)
        let lifetime = StoreTransaction(transactionID: "1", originalTransactionID: "1", productID: "lifetime", purchaseDate: Self.start)
        let pass = StoreTransaction(transactionID: "2", originalTransactionID: "2", productID: "pass", purchaseDate: Self.start)
        let pass2 = StoreTransaction(transactionID: "3", originalTransactionID: "3", productID: "pass", purchaseDate: Self.start.addingTimeInterval(30))
        let coins = StoreTransaction(transactionID: "4", originalTransactionID: "4", productID: "coins", purchaseDate: Self.start)
        #expect(DerivedEntitlementEvent.derive(before: EntitlementState(), after: Self.state([lifetime], at: at),
                                               cause: Self.appStore([lifetime]))?.type == .nonConsumablePurchase)
        #expect(DerivedEntitlementEvent.derive(before: EntitlementState(), after: Self.state([pass], at: at),
                                               cause: Self.appStore([pass]))?.type == .nonRenewingPurchase)
        // A second pass stacks: the same entitlement lasts longer.
        #expect(DerivedEntitlementEvent.derive(before: Self.state([pass], at: at), after: Self.state([pass, pass2], at: at),
                                               cause: Self.appStore([pass2]))?.type == .nonRenewingPurchase)
        let credited = DerivedEntitlementEvent.derive(before: EntitlementState(), after: EntitlementState(consumables: ["coins": 100]),
                                                      cause: Self.appStore([coins]))
        #expect(credited == DerivedEntitlementEvent(type: .consumablePurchase, productID: "coins", transactionID: "4", originalTransactionID: "4",
                                                    environment: .sandbox))
        #expect(DerivedEntitlementEvent.derive(before: EntitlementState(consumables: ["coins": 100]), after: EntitlementState(consumables: ["coins": 0]),
                                               cause: Self.appStore([coins], new: []))?.type == .refund)
        // A refund's debit credited back by Apple's reversal, and refunded again.
        #expect(DerivedEntitlementEvent.derive(before: EntitlementState(consumables: ["coins": 0]), after: EntitlementState(consumables: ["coins": 100]),
                                               cause: Self.appStore([coins], new: [], notification: "REFUND_REVERSED"))
                == DerivedEntitlementEvent(type: .refundReversed, productID: "coins", transactionID: "4", originalTransactionID: "4",
                                           environment: .sandbox))
        #expect(DerivedEntitlementEvent.derive(before: EntitlementState(consumables: ["coins": 100]), after: EntitlementState(consumables: ["coins": 0]),
                                               cause: Self.appStore([coins], new: [], notification: "REFUND"))?.type == .refund)
        // A reversal seen without Apple's notification (a status refresh shows the refund gone): the ledger's reversal names it.
        let older = StoreTransaction(transactionID: "5", originalTransactionID: "5", productID: "coins", purchaseDate: Self.start.addingTimeInterval(-60))
        #expect(DerivedEntitlementEvent.derive(before: EntitlementState(consumables: ["coins": 0]), after: EntitlementState(consumables: ["coins": 100]),
                                               cause: Self.appStore([coins, older], new: [], reversed: ["5"]))
                == DerivedEntitlementEvent(type: .refundReversed, productID: "coins", transactionID: "5", originalTransactionID: "5",
                                           environment: .sandbox))
        // Several consumables recorded at once, one of them new: the event names the new one, not a newer one recorded before.
        #expect(DerivedEntitlementEvent.derive(before: EntitlementState(consumables: ["coins": 100]), after: EntitlementState(consumables: ["coins": 200]),
                                               cause: Self.appStore([coins, older], new: [older]))?.transactionID == "5")
        // Apple's refund arrived before anyone owned the purchase: credited and debited at once, the balance first shown at zero.
        #expect(DerivedEntitlementEvent.derive(before: EntitlementState(), after: EntitlementState(consumables: ["coins": 0]),
                                               cause: Self.appStore([coins]))
                == DerivedEntitlementEvent(type: .refund, productID: "coins", transactionID: "4", originalTransactionID: "4", environment: .sandbox))
    }

    /// An upgrade (or downgrade) within the group to a product giving other entitlements, by Apple's notification or a
    /// receipt: one entitlement ends as the same subscription's new product starts another, a product change.
    @Test func anUpgradeToAProductWithOtherEntitlementsIsAProductChange() throws {
        let monthly = Self.subscription("100", month: 0)
        let upgradedAt = Self.start.addingTimeInterval(86_400 * 10)
        let basic = StoreTransaction(transactionID: "101", originalTransactionID: "100", productID: "basic", purchaseDate: upgradedAt,
                                     expiresDate: ISODuration(months: 1).adding(to: upgradedAt))
        var upgraded = monthly
        upgraded.isUpgraded = true
        let at = upgradedAt.addingTimeInterval(60)
        for notification in [nil, "DID_CHANGE_RENEWAL_PREF"] {
            let event = DerivedEntitlementEvent.derive(before: Self.state([monthly], at: at), after: Self.state([upgraded, basic], at: at),
                                                       cause: Self.appStore([upgraded, basic], new: [basic], notification: notification))
            #expect(event == DerivedEntitlementEvent(type: .productChange, productID: "basic", transactionID: "101",
                                                     originalTransactionID: "100", environment: .sandbox), "\(notification ?? "receipt")")
        }
        // Refunded at once: the refund still names the event.
        var refunded = basic
        refunded.cancellationDate = at
        let event = DerivedEntitlementEvent.derive(before: Self.state([upgraded, basic], at: at), after: Self.state([upgraded, refunded], at: at),
                                                   cause: Self.appStore([upgraded, refunded], new: []))
        #expect(event?.type == .refund)
    }

    // MARK: - Time, admin, spends and transfers

    @Test func timeAloneExpiresAtTheReportsNextChange() throws {
        let first = Self.subscription("100", month: 0)
        let at = Self.start.addingTimeInterval(60)
        let report = EntitlementEvaluator.evaluate(transactions: [OwnedTransaction(first, environment: .sandbox)], renewals: [],
                                                   grants: [], catalog: Self.catalog, at: at)
        let end = try #require(report.nextChange)
        #expect(end == first.expiresDate)
        let event = DerivedEntitlementEvent.derive(before: Self.state([first], at: at), after: Self.state([first], at: end),
                                                   cause: Self.time([first]))
        #expect(event == DerivedEntitlementEvent(type: .expiration, productID: "monthly", transactionID: "100",
                                                 originalTransactionID: "100", environment: .sandbox))
    }

    /// Apple renews a subscription ahead of time (the renewal bought at the old expiry, recorded before it): at
    /// the record nothing shows yet, and when the old end passes the answer shows the new end: a `renewal`
    /// carrying the renewal's transaction, not an expiration of a subscription still active.
    @Test func aRenewalRecordedAheadIsARenewalWhenItComesIntoForce() throws {
        let first = Self.subscription("100", month: 0), renewal = Self.subscription("101", month: 1)
        let renewing = RenewalInfo(originalTransactionID: "100", productID: "monthly", willRenew: true)
        let recordedAt = try #require(first.expiresDate).addingTimeInterval(-3_600)
        #expect(Self.state([first], renewals: [renewing], at: recordedAt) == Self.state([first, renewal], renewals: [renewing], at: recordedAt))
        let end = try #require(first.expiresDate)
        let event = DerivedEntitlementEvent.derive(before: Self.state([first, renewal], renewals: [renewing], at: recordedAt),
                                                   after: Self.state([first, renewal], renewals: [renewing], at: end),
                                                   cause: Self.time([first, renewal]))
        #expect(event == DerivedEntitlementEvent(type: .renewal, productID: "monthly", transactionID: "101",
                                                 originalTransactionID: "100", environment: .sandbox))
        // A scheduled change of product (a downgrade taking effect at the renewal) is a product change.
        let annual = Self.subscription("102", product: "annual", month: 1)
        let changed = DerivedEntitlementEvent.derive(before: Self.state([first, annual], renewals: [renewing], at: recordedAt),
                                                     after: Self.state([first, annual], renewals: [renewing], at: end),
                                                     cause: Self.time([first, annual]))
        #expect(changed?.type == .productChange && changed?.transactionID == "102")
        // A downgrade to a product unlocking another entitlement: one ends as the other starts, still a product change.
        let basic = Self.subscription("103", product: "basic", month: 1)
        let downgraded = DerivedEntitlementEvent.derive(before: Self.state([first, basic], renewals: [renewing], at: recordedAt),
                                                        after: Self.state([first, basic], renewals: [renewing], at: end),
                                                        cause: Self.time([first, basic]))
        #expect(downgraded == DerivedEntitlementEvent(type: .productChange, productID: "basic", transactionID: "103",
                                                      originalTransactionID: "100", environment: .sandbox))
        // A renewal refunded before it started never gave access: the expiration names the transaction that ended.
        let refundedAhead = Self.subscription("101", month: 1, cancelled: recordedAt)
        let ended = DerivedEntitlementEvent.derive(before: Self.state([first, refundedAhead], renewals: [renewing], at: recordedAt),
                                                   after: Self.state([first, refundedAhead], renewals: [renewing], at: end),
                                                   cause: Self.time([first, refundedAhead]))
        #expect(ended?.type == .expiration && ended?.transactionID == "100", "\(String(describing: ended))")
    }

    @Test func aFutureDatedInputIsTheNextChange() {
        let later = StoreTransaction(transactionID: "1", originalTransactionID: "1", productID: "lifetime",
                                     purchaseDate: Self.start.addingTimeInterval(10))
        let report = EntitlementEvaluator.evaluate(transactions: [OwnedTransaction(later, environment: .sandbox)], renewals: [],
                                                   grants: [], catalog: Self.catalog, at: Self.start)
        #expect(report.nextChange == later.purchaseDate)
        #expect(report.entitlements.isEmpty)
    }

    /// A transfer's events, on both sides, carry the purchase that moved: product, transactions and environment.
    @Test func aTransferNamesThePurchaseThatMoved() {
        let bought = StoreTransaction(transactionID: "7", originalTransactionID: "7", productID: "lifetime", purchaseDate: Self.start)
        let owned = Self.state([bought], at: Self.start.addingTimeInterval(60))
        let moved = Self.appStore([bought], new: [])
        guard case .appStore(let report) = moved else { return }
        let expected = DerivedEntitlementEvent(type: .transfer, productID: "lifetime", transactionID: "7", originalTransactionID: "7",
                                               environment: .sandbox)
        var gained = expected
        gained.transferredFrom = "u0"
        #expect(DerivedEntitlementEvent.derive(before: EntitlementState(), after: owned, cause: .transferredIn(from: ["7": "u0"], report: report)) == gained)
        var lost = expected
        lost.transferredTo = "u2"
        #expect(DerivedEntitlementEvent.derive(before: owned, after: EntitlementState(), cause: .transferredOut(to: ["7": "u2"], report: report)) == lost)
        // A purchase that had ended moves: only its listing leaves the old owner, and both events still name it.
        let ended = Self.subscription("300", chain: "300", month: 0)
        let endedAt = ended.expiresDate!.addingTimeInterval(86_400)
        guard case .appStore(let endedReport) = Self.appStore([ended], new: []) else { return }
        let listed = Self.state([ended], at: endedAt)
        #expect(listed.entitlements["premium"]?.active == false)
        for (before, after, cause) in [(listed, EntitlementState(), EntitlementChangeCause.transferredOut(to: ["300": "u2"], report: endedReport)),
                                       (EntitlementState(), listed, .transferredIn(from: ["300": "u0"], report: endedReport))] {
            let event = DerivedEntitlementEvent.derive(before: before, after: after, cause: cause)
            #expect(event?.productID == "monthly" && event?.transactionID == "300" && event?.originalTransactionID == "300"
                    && event?.environment == .sandbox, "\(String(describing: event))")
        }
        // Purchases from two users at once: the event names one of them with the user it came from, never another's.
        let pass = StoreTransaction(transactionID: "8", originalTransactionID: "8", productID: "pass", purchaseDate: Self.start)
        let both = Self.state([bought, pass], at: Self.start.addingTimeInterval(60))
        for (lifetimeFrom, passFrom) in [("ra", "rb"), ("rb", "ra")] {
            let event = DerivedEntitlementEvent.derive(before: EntitlementState(), after: both,
                                                       cause: .transferredIn(from: ["7": lifetimeFrom, "8": passFrom], report: report))
            #expect(event?.transferredFrom == (event?.originalTransactionID == "7" ? lifetimeFrom : passFrom), "\(String(describing: event))")
        }
    }

    @Test func causesThatNameThemselves() {
        let granted = EntitlementState(entitlements: ["pro": Entitlement(expiresAt: nil, inactiveReason: nil, source: .grant(id: "g", reason: "r"))])
        #expect(DerivedEntitlementEvent.derive(before: EntitlementState(), after: granted, cause: .grant(id: "g"))?.type == .grant)
        #expect(DerivedEntitlementEvent.derive(before: granted, after: EntitlementState(), cause: .grantRevoked(id: "g"))?.type == .grantRevoked)
        #expect(DerivedEntitlementEvent.derive(before: EntitlementState(consumables: ["coins": 5]), after: EntitlementState(consumables: ["coins": 4]),
                                               cause: .consumableSpent(currency: "coins"))?.type == .consumableSpent)
        let nothing = AppStoreReport(transactions: [], newTransactionIDs: [])
        #expect(DerivedEntitlementEvent.derive(before: EntitlementState(), after: granted, cause: .transferredIn(from: ["1": "u0"], report: nothing))
                == DerivedEntitlementEvent(type: .transfer, transferredFrom: "u0"))
        #expect(DerivedEntitlementEvent.derive(before: granted, after: EntitlementState(), cause: .transferredOut(to: ["1": "u2"], report: nothing))
                == DerivedEntitlementEvent(type: .transfer, transferredTo: "u2"))
        #expect(DerivedEntitlementEvent.derive(before: granted, after: granted, cause: .grant(id: "g")) == nil)
    }

    @Test(arguments: [
        ("SUBSCRIBED", "INITIAL_BUY", EntitlementEventType.initialPurchase), ("SUBSCRIBED", "RESUBSCRIBE", .renewal),
        ("DID_RENEW", nil, .renewal), ("DID_RENEW", "BILLING_RECOVERY", .renewal),
        ("DID_CHANGE_RENEWAL_STATUS", "AUTO_RENEW_DISABLED", .cancellation),
        ("DID_CHANGE_RENEWAL_STATUS", "AUTO_RENEW_ENABLED", .uncancellation), ("DID_FAIL_TO_RENEW", "GRACE_PERIOD", .billingIssue),
        ("DID_FAIL_TO_RENEW", nil, .billingIssue), ("EXPIRED", "VOLUNTARY", .expiration), ("GRACE_PERIOD_EXPIRED", nil, .expiration),
        ("REFUND", nil, .refund), ("REFUND_REVERSED", nil, .refundReversed), ("REVOKE", nil, .revoke),
        ("DID_CHANGE_RENEWAL_PREF", "UPGRADE", .productChange), ("OFFER_REDEEMED", "INITIAL_BUY", .initialPurchase),
        ("RENEWAL_EXTENDED", nil, .renewal),
    ] as [(String, String?, EntitlementEventType)])
    func notificationsHaveAMeaning(type: String, subtype: String?, expected: EntitlementEventType) {
        #expect(DerivedEntitlementEvent.meaning(ofNotification: type, subtype: subtype) == expected)
    }

    @Test(arguments: ["TEST", "CONSUMPTION_REQUEST", "PRICE_INCREASE", "REFUND_DECLINED", "RENEWAL_EXTENSION", "EXTERNAL_PURCHASE_TOKEN"])
    func notificationsThatChangeNothingHaveNone(type: String) {
        #expect(DerivedEntitlementEvent.meaning(ofNotification: type, subtype: nil) == nil)
    }
}
