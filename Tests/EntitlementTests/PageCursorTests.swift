import Foundation
import Testing
@testable import EntitlementService

/// The opaque cursors of the deliveries list and the customer view: what is handed out reads back, nothing
/// else does.
@Suite struct PageCursorTests {
    @Test(arguments: [PageCursor(number: 0), PageCursor(number: 42), PageCursor(number: .max), PageCursor(number: -7),
                      PageCursor(number: 1_767_225_600_250_000, id: "1000000123"), PageCursor(number: 5, id: "a:b/c+d=é"),
                      PageCursor(number: 5, id: String(repeating: "7", count: 3_000))])
    func whatIsHandedOutReadsBack(cursor: PageCursor) {
        #expect(PageCursor(text: cursor.text) == cursor)
        #expect(cursor.text.allSatisfy { $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" }, "URL-safe: \(cursor.text)")
    }

    @Test(arguments: ["", "nope", "v1:12", "djE6", "djI6MTI", "djE6MTI6", "djE6eA", "djE6MTI6Og", "a+b/c==", String(repeating: "A", count: 8_193)])
    func anythingElseIsRefused(text: String) {
        #expect(PageCursor(text: text) == nil)
    }
}
