import Crypto
import Foundation
import SwiftASN1
import X509

/// A signing chain kept as PEM files in a directory (`FAKE_APPLE_SIGNING_DIR`), so that a fake restarted on
/// it signs with the same root the service already trusts.
extension FakeSigningChain {
    /// The files of a chain directory: the three certificates and the leaf's private key (PKCS#8). The root's
    /// and the intermediate's keys are not kept: nothing is issued after the chain is made.
    public static let fileNames = (root: "root.pem", intermediate: "intermediate.pem", leaf: "leaf.pem", leafKey: "leaf-key.pem")

    /// Loads the chain from `directory`; when the directory is missing or holds none of the chain's files,
    /// makes a new chain and writes it there first (the key readable by its owner only). A directory with
    /// some of the files but not all, a file that does not parse, or certificates that do not chain to the
    /// key are errors naming the file.
    public init(directory: String) throws(FakeSigningChainError) {
        let names = Self.fileNames
        let paths = [names.root, names.intermediate, names.leaf, names.leafKey].map { directory + "/" + $0 }
        let present = paths.filter { FileManager.default.fileExists(atPath: $0) }
        if present.isEmpty {
            let made = Self.make()
            try made.write(to: directory)
            self = made
            return
        }
        if let missing = paths.first(where: { !present.contains($0) }) {
            throw FakeSigningChainError("\(missing) is missing (a chain directory holds \(paths.map { ($0 as NSString).lastPathComponent }.joined(separator: ", ")))")
        }
        func text(_ path: String) throws(FakeSigningChainError) -> String {
            guard let data = FileManager.default.contents(atPath: path), let text = String(data: data, encoding: .utf8) else {
                throw FakeSigningChainError("cannot read \(path)")
            }
            return text
        }
        func certificate(_ path: String) throws(FakeSigningChainError) -> Certificate {
            do {
                return try Certificate(pemEncoded: try text(path))
            } catch {
                throw FakeSigningChainError("\(path) is not a PEM certificate")
            }
        }
        let key: P256.Signing.PrivateKey
        do {
            key = try P256.Signing.PrivateKey(pemRepresentation: try text(paths[3]))
        } catch {
            throw FakeSigningChainError("\(paths[3]) is not a PEM P-256 private key")
        }
        try self.init(root: try certificate(paths[0]), intermediate: try certificate(paths[1]), leaf: try certificate(paths[2]), leafKey: key)
    }

    /// Writes the chain's files into `directory`, creating it when missing.
    func write(to directory: String) throws(FakeSigningChainError) {
        let names = Self.fileNames
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            for (name, der) in [(names.root, rootDER), (names.intermediate, intermediateDER), (names.leaf, leafDER)] {
                try Data(Self.pem(der).utf8).write(to: URL(fileURLWithPath: directory + "/" + name))
            }
            let keyPath = directory + "/" + names.leafKey
            guard FileManager.default.createFile(atPath: keyPath, contents: Data((leafKey.pemRepresentation + "\n").utf8),
                                                 attributes: [.posixPermissions: 0o600]) else {
                throw POSIXError(.init(rawValue: errno) ?? .EIO)
            }
        } catch {
            throw FakeSigningChainError("cannot write the signing chain to \(directory): \(error)")
        }
    }
}
