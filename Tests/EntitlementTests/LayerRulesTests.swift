import Foundation
import Testing

/// The rules of ARCHITECTURE.md that a reading of the sources can check: the service's SQL lives in its stores,
/// the runtime knows nothing of the domain, the model does no I/O and reads no clock, the service reaches C only to
/// run its worker processes, the executable declares nothing public, and the libraries document what they make public.
@Suite struct LayerRulesTests {
    private static let sources = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent()  // EntitlementTests
        .deletingLastPathComponent()  // Tests
        .deletingLastPathComponent()  // <repo>
        .appendingPathComponent("Sources", isDirectory: true)

    /// Every Swift file under `Sources/<target>`, by path relative to that folder, with its text.
    private static func files(of target: String) throws -> [(path: String, text: String)] {
        let root = sources.appendingPathComponent(target)
        let enumerator = try #require(FileManager.default.enumerator(at: root, includingPropertiesForKeys: nil))
        var files: [(String, String)] = []
        for case let url as URL in enumerator where url.pathExtension == "swift" {
            files.append((String(url.path.dropFirst(root.path.count + 1)), try String(contentsOf: url, encoding: .utf8)))
        }
        #expect(!files.isEmpty, "no sources found under \(root.path)")
        return files.sorted { $0.0 < $1.0 }
    }

    /// Lines that are code, not `//` comments.
    private static func codeLines(_ text: String) -> [Substring] {
        text.split(separator: "\n").filter { !$0.drop(while: { $0 == " " }).hasPrefix("//") }
    }

    @Test func theServicesSQLLivesInItsStores() throws {
        let statement = try Regex(#"\b(SELECT|INSERT INTO|UPDATE [a-z_]+ |DELETE FROM|WITH [a-z_]+ AS \()"#)
        for (path, text) in try Self.files(of: "EntitlementService") where !path.hasPrefix("Stores/") {
            for line in Self.codeLines(text) where line.contains(statement) {
                Issue.record("SQL outside Stores/ in \(path): \(line.trimmingCharacters(in: .whitespaces))")
            }
        }
    }

    @Test func theRuntimeAndTheModelStayInTheirLayers() throws {
        for (path, text) in try Self.files(of: "ServiceRuntime") {
            for module in ["EntitlementModel", "AppStore", "FakeAppStore", "EntitlementService"] {
                #expect(!text.contains("import \(module)\n"), "ServiceRuntime/\(path) imports \(module)")
            }
        }
        for (path, text) in try Self.files(of: "EntitlementModel") {
            for module in ["CUV", "CPostgres", "CCurl", "ServiceRuntime", "Dispatch"] {
                #expect(!text.contains("import \(module)\n"), "EntitlementModel/\(path) imports \(module)")
            }
        }
        // The model knows no time but what it is given.
        for (path, text) in try Self.files(of: "EntitlementModel") {
            for line in Self.codeLines(text) where line.contains("Date()") || line.contains("Date.now") {
                Issue.record("EntitlementModel/\(path) reads the clock: \(line.trimmingCharacters(in: .whitespaces))")
            }
        }
        // The service reaches C only to run its worker processes.
        for (path, text) in try Self.files(of: "EntitlementService") where path != "App/WorkerProcesses.swift" {
            for module in ["CUV", "CPostgres", "CCurl"] {
                #expect(!text.contains("import \(module)\n"), "EntitlementService/\(path) imports \(module)")
            }
        }
    }

    /// Every public declaration of the library targets says what it is in a `///` comment (conformance members
    /// the protocol documents excepted).
    @Test func everyPublicDeclarationIsDocumented() throws {
        let declaration = try Regex(#"^\s*(@\w+(\([^)]*\))?\s+)*public\s"#)
        let conformance = try Regex(#"\b(func (==|<|hash\(into|encode\(to)|var (description|debugDescription)\b|init\(from decoder)"#)
        for target in ["Timestamps", "EntitlementModel", "ServiceRuntime", "AppStore", "FakeAppStore"] {
            for (path, text) in try Self.files(of: target) {
                let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
                for (index, line) in lines.enumerated() where line.contains(declaration) && !line.contains(conformance) {
                    var above = index - 1
                    while above >= 0, lines[above].drop(while: { $0 == " " }).hasPrefix("@") { above -= 1 }
                    let previous = above >= 0 ? lines[above].trimmingCharacters(in: .whitespaces) : ""
                    if !previous.hasPrefix("///") && !previous.hasSuffix("*/") {
                        Issue.record("\(target)/\(path):\(index + 1) has no doc comment: \(line.trimmingCharacters(in: .whitespaces))")
                    }
                }
            }
        }
    }

    @Test func theExecutableDeclaresNothingPublic() throws {
        let declaration = try Regex(#"^\s*public\s"#)
        for (path, text) in try Self.files(of: "EntitlementService") {
            for line in Self.codeLines(text) where line.contains(declaration) {
                // A conformance to another target's public protocol must repeat its requirements as public.
                guard !path.hasSuffix("+HTTPResponseError.swift") else { continue }
                Issue.record("public in the executable, \(path): \(line.trimmingCharacters(in: .whitespaces))")
            }
        }
    }
}
