/// An environment a signed App Store payload can name (`environment`, or `receiptType` in an app transaction),
/// spelled exactly as Apple spells it; payloads are matched case-sensitively, as Apple's own library does.
public enum SignedDataEnvironment: String, Sendable, Hashable, CaseIterable {
    /// The App Store.
    case production = "Production"
    /// The App Store's sandbox.
    case sandbox = "Sandbox"
    /// StoreKit testing in Xcode: payloads signed by Xcode's own key, not the App Store.
    case xcode = "Xcode"
    /// StoreKit local testing: payloads not signed by the App Store either.
    case localTesting = "LocalTesting"

    /// Whether the App Store signs this environment's payloads; Xcode and LocalTesting payloads cannot be
    /// verified, and are accepted (without verification) only where explicitly listed.
    public var isAppStoreSigned: Bool { self == .production || self == .sandbox }

    /// The environments a comma-separated list names (`Production,Sandbox`); nil when an entry is not an
    /// environment or the list names none.
    public static func list(_ text: String) -> Set<SignedDataEnvironment>? {
        var environments: Set<SignedDataEnvironment> = []
        for entry in text.split(separator: ",", omittingEmptySubsequences: false) {
            guard let environment = SignedDataEnvironment(rawValue: entry.trimmingCharacters(in: .whitespaces)) else { return nil }
            environments.insert(environment)
        }
        return environments.isEmpty ? nil : environments
    }
}
