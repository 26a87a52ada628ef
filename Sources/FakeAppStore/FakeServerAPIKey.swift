import Crypto
import Foundation
import ServiceRuntime

/// The App Store Connect key the fake's Server API accepts tokens of, kept in a `.p8` file
/// (`FAKE_APPLE_API_KEY_FILE`) so that the service and the fake can be pointed at the same file.
enum FakeServerAPIKey {
    /// The key in the `.p8` at `path` (PEM, PKCS#8, P-256); when no file is there, a fresh key written there
    /// first (readable by its owner only). The error never holds the key.
    static func loadOrCreate(path: String) throws(ConfigurationError) -> P256.Signing.PrivateKey {
        guard FileManager.default.fileExists(atPath: path) else {
            let key = P256.Signing.PrivateKey()
            guard FileManager.default.createFile(atPath: path, contents: Data((key.pemRepresentation + "\n").utf8),
                                                 attributes: [.posixPermissions: 0o600]) else {
                throw ConfigurationError(variable: "FAKE_APPLE_API_KEY_FILE", problem: "names '\(path)', which cannot be created")
            }
            return key
        }
        guard let data = FileManager.default.contents(atPath: path), let text = String(data: data, encoding: .utf8),
              let key = try? P256.Signing.PrivateKey(pemRepresentation: text) else {
            throw ConfigurationError(variable: "FAKE_APPLE_API_KEY_FILE", problem: "names '\(path)', which is not a PEM P-256 private key")
        }
        return key
    }
}
