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
    /// A configured key and who presents it.
    struct Entry: Sendable {
        let key: [UInt8]
        let caller: Caller
        /// The failure-log field naming the caller (`actor`), made once instead of per request.
        let logMetadata: [(key: String, value: String)]

        init(key: String, caller: Caller) {
            self.key = Array(key.utf8)
            self.caller = caller
            logMetadata = [(key: "actor", value: caller.keyID)]
        }
    }

    private let entries: [Entry]

    init(appKeys: [String], adminKeys: [String]) {
        entries = adminKeys.enumerated().map { Entry(key: $1, caller: Caller(scope: .admin, keyID: "admin#\($0 + 1)")) }
            + appKeys.enumerated().map { Entry(key: $1, caller: Caller(scope: .app, keyID: "app#\($0 + 1)")) }
    }

    /// The caller an `Authorization` header value names, or nil when it holds no configured key.
    ///
    /// Every configured key is compared in full whatever matches, so the time taken tells nothing about
    /// which key, or how much of one, was right.
    func authenticate(authorization: String?) -> Caller? {
        entry(authorization: authorization)?.caller
    }

    /// The entry of the key an `Authorization` header value holds (`Bearer <key>`, the scheme in any case,
    /// spaces and tabs around the key ignored), or nil; compared as `authenticate` says.
    func entry(authorization: String?) -> Entry? {
        guard let authorization else { return nil }
        var header = authorization
        return header.withUTF8 { bytes in
            Self.bearerKey(in: bytes).flatMap { match(UnsafeBufferPointer(rebasing: bytes[$0])) }
        }
    }

    /// The first entry whose key is `presented`, every key compared in full.
    private func match(_ presented: UnsafeBufferPointer<UInt8>) -> Entry? {
        var found: Entry?
        for entry in entries where entry.key.withUnsafeBufferPointer({ Self.constantTimeEqual($0, presented) }) {
            found = found ?? entry
        }
        return found
    }

    private static let scheme: StaticString = "bearer "

    /// Where the key of a header value lies, byte by byte: the scheme in any case, then the key with the spaces
    /// and tabs around it (HTTP's whitespace, and no other) left out; any other byte belongs to the key, and no key
    /// has it. Nil when the value is no bearer key.
    private static func bearerKey(in bytes: UnsafeBufferPointer<UInt8>) -> Range<Int>? {
        let scheme = UnsafeBufferPointer(start: Self.scheme.utf8Start, count: Self.scheme.utf8CodeUnitCount)
        guard bytes.count > scheme.count else { return nil }
        for index in scheme.indices {
            let byte = bytes[index]
            if (0x41...0x5A).contains(byte) ? byte | 0x20 != scheme[index] : byte != scheme[index] { return nil }
        }
        var start = scheme.count
        var end = bytes.count
        while start < end && (bytes[start] == 0x20 || bytes[start] == 0x09) { start += 1 }
        while end > start && (bytes[end - 1] == 0x20 || bytes[end - 1] == 0x09) { end -= 1 }
        return start..<end
    }

    /// Compares two byte strings in time that depends only on their lengths, not on where they differ.
    static func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        a.withUnsafeBufferPointer { a in b.withUnsafeBufferPointer { b in constantTimeEqual(a, b) } }
    }

    /// Compares two byte strings in time that depends only on their lengths, not on where they differ.
    static func constantTimeEqual(_ a: UnsafeBufferPointer<UInt8>, _ b: UnsafeBufferPointer<UInt8>) -> Bool {
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
