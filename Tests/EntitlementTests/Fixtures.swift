import Foundation

/// The shared Apple samples, found beside the repository (`<repo>/../shared/fixtures/apple`) as in CI.
enum Fixtures {
    static let directory: URL = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent()  // EntitlementTests
        .deletingLastPathComponent()  // Tests
        .deletingLastPathComponent()  // <repo>
        .deletingLastPathComponent()
        .appendingPathComponent("shared/fixtures/apple", isDirectory: true)

    /// Names of the JSON samples starting with `prefix`, sorted; empty when the directory is missing.
    static func jsonNames(prefix: String) -> [String] { names(prefix: prefix, suffix: ".json") }

    /// Names of the samples starting with `prefix` and ending with `suffix`, sorted; empty when the directory is missing.
    static func names(prefix: String, suffix: String) -> [String] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
        return names.filter { $0.hasPrefix(prefix) && $0.hasSuffix(suffix) }.sorted()
    }

    /// The bytes of one sample.
    static func data(_ name: String) throws -> Data {
        try Data(contentsOf: directory.appendingPathComponent(name))
    }
}
