import ServiceRuntime
import Foundation

/// Where a page of a newest-first list ends, for lists other than the audit log: the sort key of its last item,
/// a number (a position, a sequence, an instant in microseconds) and, where the number can tie, an id. Opaque to
/// clients: the base64url text of `v1:<number>` or `v1:<number>:<base64url of the id>`.
struct PageCursor: Sendable, Equatable {
    var number: Int64
    var id: String?

    /// The text handed to clients as a `next_…cursor`.
    var text: String {
        Self.base64URL(Data(("v1:\(number)" + (id.map { ":" + Self.base64URL(Data($0.utf8)) } ?? "")).utf8))
    }

    init(number: Int64, id: String? = nil) {
        self.number = number
        self.id = id
    }

    /// The longest cursor text read: one naming an id of some thousands of bytes (the longest a transaction id
    /// recorded from Apple's answers may reasonably be) still fits, as does a query within the header limit.
    static let maximumLength = 8_192

    /// Reads a cursor this service handed out; nil for anything else.
    init?(text: String) {
        guard (1...Self.maximumLength).contains(text.utf8.count), let decoded = Self.decodeBase64URL(text) else { return nil }
        let parts = decoded.split(separator: ":", omittingEmptySubsequences: false)
        guard (2...3).contains(parts.count), parts[0] == "v1", let number = Int64(parts[1]) else { return nil }
        if parts.count == 3 {
            guard let id = Self.decodeBase64URL(String(parts[2])), !id.isEmpty else { return nil }
            self.init(number: number, id: id)
        } else {
            self.init(number: number)
        }
    }

    private static func base64URL(_ data: Data) -> String {
        data.base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    private static func decodeBase64URL(_ text: String) -> String? {
        guard text.utf8.allSatisfy({ ($0 >= 0x30 && $0 <= 0x39) || ($0 | 0x20 >= 0x61 && $0 | 0x20 <= 0x7a) || $0 == 0x2d || $0 == 0x5f })
        else { return nil }
        var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        base64 += String(repeating: "=", count: (4 - base64.utf8.count % 4) % 4)
        return Data(base64Encoded: base64).flatMap { String(data: $0, encoding: .utf8) }
    }
}

extension InputRules {
    /// The query parameter `name` as a cursor this service handed out, or nil when absent.
    static func queryCursor(_ request: HTTPRequest, _ name: String) throws -> PageCursor? {
        try request.query[name].map { text in
            guard let cursor = PageCursor(text: text) else {
                throw ProblemError.badRequest("'\(name)' must be a cursor this service answered.", field: name)
            }
            return cursor
        }
    }
}
