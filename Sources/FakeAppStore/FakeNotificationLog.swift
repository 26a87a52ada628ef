import EntitlementModel

/// The V2 notifications the fake sent, with every delivery attempt, for Get Notification History: one entry
/// per notification (its copies are Apple's retries, so more attempts of the same entry), in the order of
/// their first attempt. Tampered notifications are not Apple's and are not kept. Free of I/O.
struct FakeNotificationLog {
    struct Entry: Equatable {
        var uuid: String
        var signedPayload: String
        var environment: StoreEnvironment
        var type: String
        var subtype: String?
        /// The original transaction of the purchase it is about, for the `transactionId` filter.
        var originalTransactionID: String?
        /// Each attempt's time (milliseconds since 1970) and Apple's `sendAttemptResult`.
        var attempts: [(dateMs: Int64, result: String)]

        static func == (a: Entry, b: Entry) -> Bool {
            a.uuid == b.uuid && a.signedPayload == b.signedPayload && a.environment == b.environment && a.type == b.type
                && a.subtype == b.subtype && a.originalTransactionID == b.originalTransactionID
                && a.attempts.elementsEqual(b.attempts) { $0.dateMs == $1.dateMs && $0.result == $1.result }
        }
    }

    /// What a Get Notification History request asks for (its body, the transaction resolved to its purchase).
    struct Query: Equatable {
        var startMs: Int64
        var endMs: Int64
        var type: String?
        var subtype: String?
        var originalTransactionID: String?
        var onlyFailures = false
    }

    /// The most entries kept (the oldest go first).
    static let capacity = 10_000
    /// Entries per page, as Apple's.
    static let pageSize = 20

    private(set) var entries: [Entry] = []
    private var positions: [String: Int] = [:]

    /// Adds one delivery attempt of `entry`'s notification (the first makes the entry).
    mutating func record(_ entry: Entry, attempt dateMs: Int64, result: String) {
        if let position = positions[entry.uuid] {
            entries[position].attempts.append((dateMs, result))
            return
        }
        if entries.count == Self.capacity {
            entries.removeFirst()
            positions = Dictionary(uniqueKeysWithValues: entries.enumerated().map { ($0.element.uuid, $0.offset) })
        }
        var first = entry
        first.attempts = [(dateMs, result)]
        positions[entry.uuid] = entries.count
        entries.append(first)
    }

    mutating func reset() {
        self = FakeNotificationLog()
    }

    /// The page of `environment`'s entries matching `query` that starts at match number `offset`, and the
    /// offset of the next page when there is one. An entry is in the span when its first attempt is.
    func page(_ query: Query, environment: StoreEnvironment, offset: Int) -> (entries: [Entry], next: Int?) {
        let matching = entries.lazy.filter { entry in
            entry.environment == environment
                && (query.startMs..<query.endMs).contains(entry.attempts[0].dateMs)
                && (query.type == nil || entry.type == query.type)
                && (query.subtype == nil || entry.subtype == query.subtype)
                && (query.originalTransactionID == nil || entry.originalTransactionID == query.originalTransactionID)
                && (!query.onlyFailures || !entry.attempts.contains { $0.result == "SUCCESS" })
        }
        let page = Array(matching.dropFirst(offset).prefix(Self.pageSize + 1))
        return (Array(page.prefix(Self.pageSize)), page.count > Self.pageSize ? offset + Self.pageSize : nil)
    }
}
