import EntitlementModel

/// What the App Store Server API reads from the store: a purchase is known only in its own environment, and
/// history and statuses are the customer's (`FakeStoreKitTransaction.customer`).
extension FakeStoreKit {
    /// The transaction `transactionID` when it is of `environment`.
    func transaction(_ transactionID: String, in environment: StoreEnvironment) -> FakeStoreKitTransaction? {
        transactions[transactionID].flatMap { $0.environment == environment ? $0 : nil }
    }

    /// Every transaction in `environment` of the customer who made `transactionID`, oldest purchase first
    /// (then by id); nil when `transactionID` is unknown there.
    func customerTransactions(of transactionID: String, in environment: StoreEnvironment) -> [FakeStoreKitTransaction]? {
        guard let known = transaction(transactionID, in: environment) else { return nil }
        return transactions.values
            .filter { $0.customer == known.customer && $0.environment == environment }
            .sorted { ($0.purchaseDate, $0.transactionID.count, $0.transactionID) < ($1.purchaseDate, $1.transactionID.count, $1.transactionID) }
    }

    /// The original transaction ids of the customer's auto-renewable subscriptions, by subscription group
    /// (groups and subscriptions in order of their first purchase); nil when `transactionID` is unknown in
    /// `environment`.
    func customerSubscriptions(of transactionID: String, in environment: StoreEnvironment) -> [(group: String, originals: [String])]? {
        guard let owned = customerTransactions(of: transactionID, in: environment) else { return nil }
        var groups: [(group: String, originals: [String])] = []
        for transaction in owned where transaction.type == .autoRenewable && transaction.transactionID == transaction.originalTransactionID {
            let group = chain(transaction.originalTransactionID).last?.subscriptionGroupIdentifier ?? ""
            if let index = groups.firstIndex(where: { $0.group == group }) {
                groups[index].originals.append(transaction.originalTransactionID)
            } else {
                groups.append((group, [transaction.originalTransactionID]))
            }
        }
        return groups
    }

    /// The transactions of the order `orderID` in `environment`, oldest first.
    func order(_ orderID: String, in environment: StoreEnvironment) -> [FakeStoreKitTransaction] {
        transactions.values
            .filter { $0.orderID == orderID && $0.environment == environment }
            .sorted { ($0.purchaseDate, $0.transactionID) < ($1.purchaseDate, $1.transactionID) }
    }
}
