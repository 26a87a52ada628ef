import ServiceRuntime
import Foundation
import SwiftASN1
import X509

/// Typed, validated reads of environment variables; empty values count as unset.
struct EnvironmentReader {
    let environment: [String: String]

    func string(_ name: String) -> String? {
        guard let value = environment[name]?.trimmingCharacters(in: .whitespaces), !value.isEmpty else { return nil }
        return value
    }

    func int(_ name: String, default fallback: Int, in range: ClosedRange<Int>) throws(ConfigurationError) -> Int {
        guard let raw = string(name) else { return fallback }
        guard let value = Int(raw), range.contains(value) else {
            throw ConfigurationError(variable: name, problem: "expected an integer in \(range.lowerBound)...\(range.upperBound), got '\(raw)'")
        }
        return value
    }

    func url(_ name: String, default fallback: String) throws(ConfigurationError) -> String {
        guard let raw = string(name) else { return fallback }
        guard raw.hasPrefix("http://") || raw.hasPrefix("https://"), let host = URLComponents(string: raw)?.host, !host.isEmpty else {
            // The value is not repeated: a URL may carry credentials.
            throw ConfigurationError(variable: name, problem: "expected an http:// or https:// URL with a host")
        }
        return raw
    }

    /// A path, `fallback` when unset, that must name a readable file (not a directory).
    func readableFile(_ name: String, default fallback: String) throws(ConfigurationError) -> String {
        let path = string(name) ?? fallback
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), !isDirectory.boolValue,
              FileManager.default.isReadableFile(atPath: path) else {
            let named = string(name) == nil ? "is unset and its default" : "names"
            throw ConfigurationError(variable: name, problem: "\(named) '\(path)', which is not a readable file")
        }
        return path
    }

    /// Certificates from a comma-separated list of DER or PEM files (a PEM file may hold several); nil when unset.
    func certificates(_ name: String) throws(ConfigurationError) -> [Certificate]? {
        guard let raw = string(name) else { return nil }
        var certificates: [Certificate] = []
        for path in raw.split(separator: ",").map({ $0.trimmingCharacters(in: .whitespaces) }) where !path.isEmpty {
            guard let bytes = FileManager.default.contents(atPath: path) else {
                throw ConfigurationError(variable: name, problem: "names '\(path)', which cannot be read")
            }
            do {
                if let text = String(data: bytes, encoding: .utf8), text.contains("-----BEGIN") {
                    certificates += try PEMDocument.parseMultiple(pemString: text).map { try Certificate(pemDocument: $0) }
                } else {
                    certificates.append(try Certificate(derEncoded: Array(bytes)))
                }
            } catch {
                throw ConfigurationError(variable: name, problem: "names '\(path)', which is not a DER or PEM X.509 certificate")
            }
        }
        guard !certificates.isEmpty else { throw ConfigurationError(variable: name, problem: "names no certificate file") }
        return certificates
    }

    /// A comma-separated key list. The keys themselves are never echoed in an error.
    func keys(_ name: String) throws(ConfigurationError) -> [String] {
        guard let raw = string(name) else { return [] }
        let keys = raw.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
        for (index, key) in keys.enumerated() {
            guard !key.isEmpty, key.unicodeScalars.allSatisfy({ $0.value > 0x20 && $0.value < 0x7f }) else {
                throw ConfigurationError(variable: name, problem: "key #\(index + 1) must be printable ASCII without spaces")
            }
        }
        return keys
    }
}
