import ServiceRuntime
import Foundation

/// The scope a bearer key grants.
enum KeyScope: Sendable, Equatable {
    /// App backends: every route under `/v1` except `/v1/admin`.
    case app
    /// Admins: every route, admin ones included.
    case admin
}

/// Who called: the scope and a key id that is safe to log and audit (`app#2`, `admin#1`), never the key.
struct Caller: Sendable, Equatable {
    var scope: KeyScope
    var keyID: String
}

/// The configured bearer keys and the constant-time check of a presented one.
struct APIKeys: Sendable {
    private let entries: [(key: [UInt8], caller: Caller)]

    init(appKeys: [String], adminKeys: [String]) {
        entries = adminKeys.enumerated().map { (Array($1.utf8), Caller(scope: .admin, keyID: "admin#\($0 + 1)")) }
            + appKeys.enumerated().map { (Array($1.utf8), Caller(scope: .app, keyID: "app#\($0 + 1)")) }
    }

    /// The caller an `Authorization` header value names, or nil when it holds no configured key.
    ///
    /// Every configured key is compared in full whatever matches, so the time taken tells nothing about
    /// which key, or how much of one, was right.
    func authenticate(authorization: String?) -> Caller? {
        guard let authorization else { return nil }
        let scheme = "bearer "
        guard authorization.count > scheme.count, authorization.prefix(scheme.count).lowercased() == scheme else { return nil }
        let presented = Array(authorization.dropFirst(scheme.count).trimmingCharacters(in: .whitespaces).utf8)
        var found: Caller?
        for entry in entries where Self.constantTimeEqual(entry.key, presented) {
            found = found ?? entry.caller
        }
        return found
    }

    /// Compares two byte strings in time that depends only on their lengths, not on where they differ.
    static func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        var difference = UInt(bitPattern: a.count ^ b.count)
        let length = max(a.count, b.count)
        for index in 0..<length {
            let x = index < a.count ? a[index] : 0
            let y = index < b.count ? b[index] : 0
            difference |= UInt(x ^ y)
        }
        return difference == 0
    }
}
