import AppStore
import ServiceRuntime
import EntitlementModel
import Foundation

/// What a stored notification states about purchases, ready to record.
struct NotificationFacts: Sendable {
    var transactions: [StoreTransaction]
    var renewals: [RenewalInfo]
    var latestReceipt: String?
    var environment: StoreEnvironment

    /// Every purchase the notification speaks of.
    var purchaseIDs: [String] {
        Array(Set(transactions.map(\.originalTransactionID) + renewals.map(\.originalTransactionID))).sorted()
    }

    /// Decodes what `notification` stored: a V2 notification's verified transaction and renewal info (the
    /// transaction dated by its own `signedDate`, else the notification's; the renewal state by the
    /// notification's), or a V1 notification's unified receipt.
    init(_ notification: StoredNotification) throws {
        let signedEnvironment = notification.environment.flatMap(SignedDataEnvironment.init(rawValue:)) ?? .production
        environment = signedEnvironment.recorded
        guard notification.version == 2 else {
            let v1 = try AppStoreNotificationV1(jsonData: Data(notification.signedPayload.utf8))
            transactions = v1.transactions()
            renewals = v1.renewalInfo()
            latestReceipt = v1.latestReceipt
            return
        }
        latestReceipt = nil
        let change: NotificationChange
        switch NotificationDisposition.of(type: notification.type, subtype: notification.subtype, carriesSignedData: true) {
        case .record(let recorded): change = recorded
        case .ignore: change = .other  // never stored as received
        }
        transactions = try notification.transactionInfo.map { json in
            var transaction = try AppStoreTransactionV2(jsonData: json).transaction
            transaction.signedDate = transaction.signedDate ?? notification.signedDate
            return [signedEnvironment.recorded(change.stating(transaction))]
        } ?? []
        renewals = try notification.renewalInfo.map { json in
            var renewal = try AppStoreRenewalInfoV2(jsonData: json).renewal
            renewal.signedDate = notification.signedDate
            return [signedEnvironment.recorded(renewal)]
        } ?? []
    }

    /// Only what concerns `originalTransactionID`.
    func only(_ originalTransactionID: String) -> NotificationFacts {
        var facts = self
        facts.transactions = transactions.filter { $0.originalTransactionID == originalTransactionID }
        facts.renewals = renewals.filter { $0.originalTransactionID == originalTransactionID }
        return facts
    }
}

extension PurchaseRecorder {
    /// Applies a stored notification that is still `received`, in a transaction of its own holding the locks of
    /// its purchases: recorded for the owner of each purchase (a user whose token a transaction carries, else the
    /// recorded owner), then marked `applied` with the owner of its purchase, or `parked` when that purchase has
    /// none; the webhook events of the users it changed are written in the same transaction. Notifications of the
    /// same purchase signed before it and still `received` (their first taker died before applying them, or the
    /// worker has not come to them) are applied first, oldest first, so none is overtaken by a later one. Returns
    /// the owner (nil: parked), or nil without change when another caller applied it first.
    func applyReceived(_ notification: StoredNotification) async throws -> NotificationApplication? {
        let facts = try NotificationFacts(notification)
        let purchases = facts.purchaseIDs + [notification.originalTransactionID].compactMap { $0 }
        return try await db.transaction { connection in
            try await owners.lockPurchases(purchases, on: connection)
            let waiting = try await notifications.lockReceived(upTo: notification.uuid, on: connection)
            guard !waiting.isEmpty else { return nil }
            // The earlier ones about no purchase beyond those locked (a V1 notification may speak of several).
            let earlier = try waiting.dropLast()
                .map { ($0, try NotificationFacts($0)) }
                .filter { Set($0.1.purchaseIDs).isSubset(of: purchases) }
            let all = earlier + [(notification, facts)]
            let watch = try await events.watch(
                try await usersConcerned(purchases: purchases, tokens: all.flatMap { $0.1.transactions.compactMap(\.accountToken) }, poster: nil,
                                         on: connection),
                on: connection)
            var effects = RecordingEffects(transactions: [])
            var owner: String?
            for (stored, storedFacts) in all {
                let applied = try await apply(stored, storedFacts, catalog: watch.catalog, on: connection)
                owner = applied.owner
                effects.add(applied.effects)
            }
            try await finishEvents(watch, effects, report: notification, on: connection)
            if !earlier.isEmpty {
                Log.info("app_store_notifications_applied_in_order", ["notification_uuid": notification.uuid,
                                                                      "earlier": earlier.map(\.0.uuid).joined(separator: ",")])
            }
            return NotificationApplication(owner: owner)
        }
    }

    /// The parked notifications of a purchase that just got its first owner, applied oldest signed first in the
    /// caller's transaction (which holds the purchase's lock and watches its owner); returns what they recorded.
    func applyParked(of originalTransactionID: String, catalog: Catalog, on connection: PostgresConnection) async throws -> RecordingEffects {
        var effects = RecordingEffects(transactions: [])
        for notification in try await notifications.lockParked(of: originalTransactionID, on: connection) {
            let facts = try NotificationFacts(notification).only(originalTransactionID)
            let (owner, applied) = try await apply(notification, facts, catalog: catalog, on: connection)
            effects.add(applied)
            Log.info("app_store_notification_unparked", ["notification_uuid": notification.uuid, "original_transaction_id": originalTransactionID,
                                                        "applied": owner != nil])
        }
        return effects
    }

    /// Records `facts` for the owners of their purchases and settles the notification; returns the owner of its
    /// own purchase (nil: parked) and what was recorded.
    private func apply(_ notification: StoredNotification, _ facts: NotificationFacts, catalog: Catalog,
                       on connection: PostgresConnection) async throws -> (owner: String?, effects: RecordingEffects) {
        let tokenUsers = try await tokens.users(of: Set(facts.transactions.compactMap(\.accountToken)), on: connection)
        var purchaseOwners = try await owners.owners(of: facts.purchaseIDs, on: connection)
        for transaction in facts.transactions where purchaseOwners[transaction.originalTransactionID] == nil {
            purchaseOwners[transaction.originalTransactionID] = transaction.accountToken.flatMap { tokenUsers[$0] }
        }
        var effects = RecordingEffects(transactions: [])
        for (owner, ids) in Dictionary(grouping: purchaseOwners.keys, by: { purchaseOwners[$0]! }).sorted(by: { $0.key < $1.key }) {
            let purchases = Set(ids)
            effects.add(try await record(
                transactions: facts.transactions.filter { purchases.contains($0.originalTransactionID) },
                renewals: facts.renewals.filter { purchases.contains($0.originalTransactionID) },
                latestReceipt: facts.latestReceipt, environment: facts.environment, catalog: catalog,
                context: .init(poster: owner, movesOwnership: false, actor: "app-store-notification", claim: nil, orderID: nil),
                on: connection))
        }
        // A transaction carrying another user's issued token moved its purchase to that user.
        var owner = notification.originalTransactionID.flatMap { purchaseOwners[$0] }
        if let id = notification.originalTransactionID, !effects.transfers.isEmpty {
            owner = try await owners.owners(of: [id], on: connection)[id]
        }
        try await notifications.settle(notification.uuid, owner: owner, on: connection)
        return (owner, effects)
    }
}

/// How applying a received notification ended.
struct NotificationApplication: Sendable {
    /// The owner it was recorded for; nil when it was parked.
    var owner: String?
}
