/// What a newest-first admin list calls its items in JSON (`events`, `notifications`, `deliveries`).
protocol PageItem: Encodable {
    static var listKey: String { get }
}

/// A page of a newest-first admin list: `{"<items>": [...], "next_cursor": "..."|null}`, the cursor naming where
/// the next older page starts (null on the last).
struct PageBody<Item: PageItem>: Encodable {
    var items: [Item]
    var nextCursor: String?

    private struct Key: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: Key.self)
        try container.encode(items, forKey: Key(stringValue: Item.listKey))
        try container.encode(nextCursor, forKey: Key(stringValue: "next_cursor"))
    }
}
