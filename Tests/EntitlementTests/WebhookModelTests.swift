import Foundation
import Testing
@testable import EntitlementModel

/// The pure parts of webhooks: the state an event carries read back as written, the event body, the retry rule,
/// and the claims behind each entitlement that the customer view lists.
@Suite struct WebhookModelTests {
    private static let start = Date(timeIntervalSince1970: 1_767_225_600.25)  // 2026-01-01T00:00:00.25Z
    private static let catalog = try! Catalog(products: [
        Product(productID: "monthly", type: .autoRenewable, entitlements: ["premium"], subscriptionGroup: "g"),
        Product(productID: "lifetime", type: .nonConsumable, entitlements: ["pro", "premium"]),
    ])

    private static func month(_ id: String, _ index: Int, cancelled: Date? = nil) -> OwnedTransaction {
        let purchased = ISODuration(months: index).adding(to: start)
        return OwnedTransaction(StoreTransaction(transactionID: id, originalTransactionID: "100", productID: "monthly",
                                                 purchaseDate: purchased, expiresDate: ISODuration(months: 1).adding(to: purchased),
                                                 cancellationDate: cancelled), environment: .production)
    }

    private static let grant = Grant(id: "g-1", userID: "u1", entitlement: "premium", createdAt: start,
                                     expiresAt: start.addingTimeInterval(86_400 * 90), reason: "support")

    // MARK: - State read back as written

    @Test func aStateReadsBackAsWrittenWholeSeconds() throws {
        let report = EntitlementEvaluator.evaluate(
            transactions: [Self.month("1", 0), Self.month("2", 1)], renewals: [RenewalInfo(originalTransactionID: "100", productID: "monthly", willRenew: true)],
            grants: [Self.grant, Grant(id: "g-2", userID: "u1", entitlement: "vip", createdAt: Self.start, revokedAt: Self.start.addingTimeInterval(5), reason: "x")],
            catalog: Self.catalog, at: Self.start.addingTimeInterval(86_400 * 40))
        let state = EntitlementState(entitlements: report.entitlements, consumables: ["coins": 7, "gems": -2])
        let decoded = try JSONDecoder().decode(EntitlementState.self, from: JSONEncoder().encode(state))
        #expect(decoded == state.asWritten)
        #expect(decoded != state, "the fraction of a second is not written")
        #expect(decoded.entitlements["vip"]?.inactiveReason == .revoked)
        #expect(decoded.asWritten == decoded)
    }

    @Test func unknownSourcesAndBadDatesDoNotDecode() {
        let bad = [
            #"{"entitlements": {"p": {"active": true, "source": "gift", "expires_at": null}}, "consumables": {}}"#,
            #"{"entitlements": {"p": {"active": true, "source": "grant", "grant_id": "g", "reason": "r", "expires_at": "soon"}}, "consumables": {}}"#,
        ]
        for text in bad {
            #expect(throws: DecodingError.self) { try JSONDecoder().decode(EntitlementState.self, from: Data(text.utf8)) }
        }
    }

    // MARK: - The event body

    @Test func aGrantEventLeavesOutThePurchaseFields() throws {
        let state = EntitlementState(entitlements: ["premium": Entitlement(expiresAt: nil, inactiveReason: nil, source: .grant(id: "g-1", reason: "r"))],
                                     consumables: ["coins": 3])
        let id = UUID(uuidString: "0B0E9A7C-3F1D-4E55-9C3B-1B2A3C4D5E6F")!
        let event = WebhookEvent(id: id, userID: "u1", sequence: 17, createdAt: Self.start,
                                 change: DerivedEntitlementEvent(type: .grant), state: state)
        let body = String(decoding: try event.body(), as: UTF8.self)
        #expect(body == #"{"consumables":{"coins":3},"created_at":"2026-01-01T00:00:00Z","entitlements":{"premium":{"active":true,"expires_at":null,"grant_id":"g-1","reason":"r","source":"grant"}},"id":"0b0e9a7c-3f1d-4e55-9c3b-1b2a3c4d5e6f","sequence":17,"type":"grant","user_id":"u1"}"#)
        #expect(try event.body() == event.body(), "the same event is always the same bytes")
    }

    @Test func aPurchaseEventNamesItsPurchaseAndATransferBothUsers() throws {
        let change = DerivedEntitlementEvent(type: .renewal, productID: "monthly", transactionID: "2", originalTransactionID: "100",
                                             environment: .production)
        let fields = try JSONSerialization.jsonObject(with: Data(WebhookEvent(
            id: UUID(), userID: "u1", sequence: 1, createdAt: Self.start, change: change, state: EntitlementState()).body())) as! [String: Any]
        #expect(fields["type"] as? String == "renewal")
        #expect(fields["environment"] as? String == "Production")
        #expect(fields["product_id"] as? String == "monthly")
        #expect(fields["transaction_id"] as? String == "2")
        #expect(fields["original_transaction_id"] as? String == "100")
        #expect(fields["transferred_from"] == nil && fields["transferred_to"] == nil)

        for (change, key, value) in [(DerivedEntitlementEvent(type: .transfer, transferredFrom: "old"), "transferred_from", "old"),
                                     (DerivedEntitlementEvent(type: .transfer, transferredTo: "new"), "transferred_to", "new")] {
            let fields = try JSONSerialization.jsonObject(with: Data(WebhookEvent(
                id: UUID(), userID: "u1", sequence: 2, createdAt: Self.start, change: change, state: EntitlementState()).body())) as! [String: Any]
            #expect(fields[key] as? String == value)
            #expect(fields["environment"] == nil && fields["product_id"] == nil)
        }
    }

    // MARK: - The retry rule

    @Test func anyTwoHundredIsDeliveredAndEverythingElseRetried() {
        let policy = WebhookRetryPolicy.standard
        let now = Self.start
        for status in [200, 201, 204, 299] {
            #expect(policy.decide(.response(status: status), attempt: 1, pendingSince: now, now: now, jitter: 1) == .delivered)
        }
        for outcome in [WebhookAttemptOutcome.response(status: 199), .response(status: 300), .response(status: 410),
                        .response(status: 503), .noResponse] {
            #expect(policy.decide(outcome, attempt: 1, pendingSince: now, now: now, jitter: 1) == .retry(at: now.addingTimeInterval(5)))
        }
    }

    @Test func waitsDoubleFromFiveSecondsWithinHalfAndAllOfTheirValueUpToAnHour() {
        let policy = WebhookRetryPolicy.standard
        let now = Self.start
        var ceiling = 5.0
        for attempt in 1...14 {
            for jitter in [0.5, 0.75, 1.0] {
                guard case .retry(let at) = policy.decide(.noResponse, attempt: attempt, pendingSince: now, now: now, jitter: jitter) else {
                    Issue.record("attempt \(attempt) was not retried")
                    continue
                }
                #expect(at.timeIntervalSince(now) == (ceiling * jitter * 1_000).rounded(.towardZero) / 1_000, "attempt \(attempt)")
            }
            ceiling = min(ceiling * 2, 3_600)
        }
        #expect(ceiling == 3_600)
    }

    @Test func retriesForThreeDaysThenFails() {
        let policy = WebhookRetryPolicy.standard
        let since = Self.start
        let lastChance = since.addingTimeInterval(3 * 86_400 - 3_600)
        #expect(policy.decide(.noResponse, attempt: 80, pendingSince: since, now: lastChance, jitter: 1) == .retry(at: since.addingTimeInterval(3 * 86_400)))
        // A wait ending past the window ends with it: the last attempt is at the end of the 3 days, and only its failure fails.
        let windowEnd = since.addingTimeInterval(3 * 86_400)
        #expect(policy.decide(.noResponse, attempt: 80, pendingSince: since, now: lastChance.addingTimeInterval(1), jitter: 1) == .retry(at: windowEnd))
        #expect(policy.decide(.noResponse, attempt: 81, pendingSince: since, now: windowEnd.addingTimeInterval(-0.001), jitter: 1) == .retry(at: windowEnd))
        #expect(policy.decide(.noResponse, attempt: 82, pendingSince: since, now: windowEnd, jitter: 1) == .failed)
        #expect(policy.decide(.response(status: 200), attempt: 99, pendingSince: since, now: lastChance.addingTimeInterval(10), jitter: 1) == .delivered,
                "a late success still counts")
        // Every attempt of a receiver that never answers, with the slowest waits: the last falls at the end of 3 days.
        var now = since
        var attempt = 1
        while case .retry(let next) = policy.decide(.noResponse, attempt: attempt, pendingSince: since, now: now, jitter: 1) {
            now = next
            attempt += 1
        }
        #expect(now == since.addingTimeInterval(3 * 86_400))
        #expect((80...85).contains(attempt))
    }

    // MARK: - Claims behind an entitlement

    @Test func everySourceOfAnEntitlementIsListedBestFirstOncePerPurchase() {
        let lifetime = OwnedTransaction(StoreTransaction(transactionID: "9", originalTransactionID: "9", productID: "lifetime",
                                                         purchaseDate: Self.start, cancellationDate: Self.start.addingTimeInterval(60)),
                                        environment: .sandbox)
        let input = (transactions: [Self.month("1", 0), Self.month("2", 1), Self.month("3", 2), lifetime], grants: [Self.grant])
        let at = Self.start.addingTimeInterval(86_400 * 45)
        let claims = EntitlementEvaluator.claims(transactions: input.transactions, renewals: [], grants: input.grants,
                                                 catalog: Self.catalog, at: at)
        let report = EntitlementEvaluator.evaluate(transactions: input.transactions, renewals: [], grants: input.grants,
                                                   catalog: Self.catalog, at: at)
        let premium = claims["premium"] ?? []
        #expect(premium.count == 3, "the subscription once (three renewals), the grant, the refunded lifetime purchase")
        #expect(premium.first?.entitlement == report.entitlements["premium"])
        #expect(premium.map(\.shown) == [true, false, false])
        #expect(premium[0].identity == "g-1", "the grant lasts longest")
        #expect(premium[1].identity == "2" && premium[1].entitlement.active, "the subscription's current period")
        #expect(premium[2].entitlement.inactiveReason == .refunded)
        #expect(claims["pro"]?.count == 1 && claims["pro"]?.first?.shown == true)
        for (name, entitlement) in report.entitlements {
            #expect(claims[name]?.first?.entitlement == entitlement, "\(name)")
        }
    }
}
