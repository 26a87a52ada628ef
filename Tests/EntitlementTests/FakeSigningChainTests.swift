import Crypto
@testable import EntitlementModel
import Foundation
import SwiftASN1
import Testing
import X509
@testable import AppStore
@testable import FakeAppStore
@testable import ServiceRuntime

/// The fake App Store's signing chain: its certificates' shape, the JWS it signs, and keeping it in a directory.
@Suite struct FakeSigningChainTests {
    static func temporaryDirectory() -> String {
        FileManager.default.temporaryDirectory.appendingPathComponent("signing-\(UUID().uuidString)").path
    }

    @Test func certificatesHaveTheShapeOfApplesChain() throws {
        let chain = FakeSigningChain.make()
        let (root, intermediate, leaf) = (chain.root, chain.intermediate, chain.leaf)
        #expect(try root.extensions.basicConstraints == .isCertificateAuthority(maxPathLength: nil))
        #expect(try intermediate.extensions.basicConstraints == .isCertificateAuthority(maxPathLength: 0))
        #expect(try leaf.extensions.basicConstraints == .notCertificateAuthority)
        #expect(try root.extensions.keyUsage == KeyUsage(keyCertSign: true, cRLSign: true))
        #expect(try intermediate.extensions.keyUsage == KeyUsage(keyCertSign: true, cRLSign: true))
        #expect(try leaf.extensions.keyUsage == KeyUsage(digitalSignature: true))
        for certificate in [root, intermediate, leaf] {
            #expect(certificate.extensions[oid: .X509ExtensionID.basicConstraints]?.critical == true)
            #expect(certificate.extensions[oid: .X509ExtensionID.keyUsage]?.critical == true)
            #expect(P256.Signing.PublicKey(certificate.publicKey) != nil)
            #expect(certificate.signatureAlgorithm == .ecdsaWithSHA256)
        }
        // Strict OpenSSL (Apple's library) wants a key identifier on each certificate and the issuer's on
        // each issued one.
        #expect(try root.extensions.authorityKeyIdentifier == nil)
        #expect(try intermediate.extensions.authorityKeyIdentifier?.keyIdentifier == root.extensions.subjectKeyIdentifier?.keyIdentifier)
        #expect(try leaf.extensions.authorityKeyIdentifier?.keyIdentifier == intermediate.extensions.subjectKeyIdentifier?.keyIdentifier)
        #expect(try leaf.extensions.subjectKeyIdentifier != nil)
        for (certificate, marker, absent) in [(intermediate, FakeSigningChain.intermediateMarker, FakeSigningChain.leafMarker),
                                              (leaf, FakeSigningChain.leafMarker, FakeSigningChain.intermediateMarker)] {
            let found = try #require(certificate.extensions[oid: marker])
            #expect(!found.critical)
            #expect(Array(found.value) == [0x05, 0x00])
            #expect(certificate.extensions[oid: absent] == nil)
        }
        #expect(root.issuer == root.subject && intermediate.issuer == root.subject && leaf.issuer == intermediate.subject)
    }

    /// The chain validates under RFC 5280 now and ten years back, so payloads dated in the past verify too.
    @Test func chainValidatesUnderRFC5280NowAndInThePast() async throws {
        let chain = FakeSigningChain.make()
        for when in [Date(), Date().addingTimeInterval(-9 * 365 * 86_400), Date().addingTimeInterval(19 * 365 * 86_400)] {
            var verifier = Verifier(rootCertificates: CertificateStore([chain.root])) { RFC5280Policy(validationTime: when) }
            let result = await verifier.validate(leaf: chain.leaf, intermediates: CertificateStore([chain.intermediate]))
            guard case .validCertificate(let validated) = result else {
                Issue.record("not valid at \(when): \(result)")
                continue
            }
            #expect(Array(validated) == [chain.leaf, chain.intermediate, chain.root])
        }
        var other = Verifier(rootCertificates: CertificateStore([FakeSigningChain.make().root])) { RFC5280Policy(validationTime: Date()) }
        guard case .couldNotValidate = await other.validate(leaf: chain.leaf, intermediates: CertificateStore([chain.intermediate])) else {
            Issue.record("validated against another root")
            return
        }
    }

    @Test func signsCompactES256WithTheWholeChain() async throws {
        let chain = FakeSigningChain.make()
        let signedDate = Int(Date().timeIntervalSince1970 * 1_000)
        let jws = chain.sign(["signedDate": .int(signedDate), "text": "é/+"])
        let parts = jws.split(separator: ".", omittingEmptySubsequences: false)
        #expect(parts.count == 3 && !jws.contains("="))
        let header = try JSONDecoder().decode(JSONValue.self, from: #require(CompactJWS.base64URLDecoded(parts[0])))
        #expect(header == ["alg": "ES256", "x5c": .array([chain.leafDER, chain.intermediateDER, chain.rootDER].map { .string(Data($0).base64EncodedString()) })])
        let payload = try await SignedJWSCheck.verify(jws, root: chain.root)
        #expect(payload == ["signedDate": .int(signedDate), "text": "é/+"])
        // The service's own verifier accepts it with the fake's root, and not with another.
        let transaction = chain.sign(["transactionId": "1", "originalTransactionId": "1", "productId": "p", "bundleId": "com.example.app",
                                      "purchaseDate": .int(signedDate), "signedDate": .int(signedDate), "environment": "Sandbox"])
        let trusting = SignedDataVerifier(roots: [chain.root], bundleID: "com.example.app", appAppleID: 1_234_567_890)
        let other = SignedDataVerifier(roots: [FakeSigningChain.make().root], bundleID: "com.example.app", appAppleID: 1_234_567_890)
        await #expect(throws: Never.self) { _ = try await trusting.verifyTransaction(transaction) }
        await #expect(throws: SignedDataError.self) { _ = try await other.verifyTransaction(transaction) }
        // Another payload under the same signature does not verify.
        let forged = parts[0] + "." + FakeSigningChain.base64URL(Array(#"{"text":"x"}"#.utf8)) + "." + parts[2]
        await #expect(throws: SignedJWSCheck.Failure.self) { try await SignedJWSCheck.verify(forged, root: chain.root) }
    }

    @Test func directoryIsCreatedOnceAndReusedAfterwards() async throws {
        let directory = Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let first = try FakeSigningChain(directory: directory)
        let names = FakeSigningChain.fileNames
        for name in [names.root, names.intermediate, names.leaf, names.leafKey] {
            #expect(FileManager.default.fileExists(atPath: directory + "/" + name), "\(name)")
        }
        let permissions = try FileManager.default.attributesOfItem(atPath: directory + "/" + names.leafKey)[.posixPermissions] as? Int
        #expect(permissions == 0o600)
        let again = try FakeSigningChain(directory: directory)
        #expect(again.rootDER == first.rootDER && again.intermediateDER == first.intermediateDER && again.leafDER == first.leafDER)
        // What the reloaded chain signs verifies against the root trusted before the restart.
        _ = try await SignedJWSCheck.verify(again.sign(["n": 1]), root: first.root)
        #expect(try FakeSigningChain(directory: directory).rootDER != FakeSigningChain.make().rootDER)
    }

    @Test func incompleteOrMismatchedDirectoriesAreRefusedNamingTheFile() throws {
        let directory = Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        _ = try FakeSigningChain(directory: directory)
        let names = FakeSigningChain.fileNames
        let keyPath = directory + "/" + names.leafKey
        let key = try #require(FileManager.default.contents(atPath: keyPath))

        try FileManager.default.removeItem(atPath: keyPath)
        #expect { try FakeSigningChain(directory: directory) } throws: { ($0 as? FakeSigningChainError)?.message.contains(names.leafKey) == true }

        try Data(P256.Signing.PrivateKey().pemRepresentation.utf8).write(to: URL(fileURLWithPath: keyPath))
        #expect { try FakeSigningChain(directory: directory) } throws: { ($0 as? FakeSigningChainError)?.message.contains("leaf key") == true }

        try key.write(to: URL(fileURLWithPath: keyPath))
        try Data("not a certificate".utf8).write(to: URL(fileURLWithPath: directory + "/" + names.intermediate))
        #expect { try FakeSigningChain(directory: directory) } throws: { ($0 as? FakeSigningChainError)?.message.contains(names.intermediate) == true }
    }

    /// `fake-app-store` on a signing directory writes the root it serves before it listens, and a restart
    /// on the same directory serves the same root.
    @Test func commandKeepsItsChainAcrossRestarts() async throws {
        let directory = Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var roots: [[UInt8]] = []
        for (index, option) in [["--root-certificate-out", directory + "/root.der"], []].enumerated() {
            let fake = try ServiceProcess(
                arguments: ["fake-app-store", "--port", "0"] + option,
                environment: ["FAKE_APPLE_SIGNING_DIR": directory, "FAKE_APPLE_ROOT_CERTIFICATE_FILE": directory + "/root-\(index).pem"],
                readyEvent: "fake_app_store_listening")
            let port = fake.port
            let served = try await offLoop {
                let connection = try RawHTTPClient(port: port)
                try connection.send(RawHTTPClient.request("GET", "/control/signing/root.der"))
                return try connection.readResponse().body
            }
            roots.append(served)
            fake.signal(SIGTERM)
            #expect(fake.waitForExit(timeout: 10) == 0)
        }
        #expect(roots.count == 2 && roots[0] == roots[1])
        #expect(try FakeSigningChain(directory: directory).rootDER == roots[0])
        // The option wins over the variable; without it the variable names the file (PEM for `.pem`).
        #expect(FileManager.default.contents(atPath: directory + "/root.der").map(Array.init) == roots[0])
        #expect(!FileManager.default.fileExists(atPath: directory + "/root-0.pem"))
        #expect(try Certificate(pemEncoded: String(contentsOfFile: directory + "/root-1.pem", encoding: .utf8)).publicKey
                == Certificate(derEncoded: roots[0]).publicKey)
    }

    @Test func rootCertificateIsWrittenAsDEROrPEM() throws {
        let chain = FakeSigningChain.make()
        let directory = Self.temporaryDirectory()
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try chain.writeRootCertificate(to: directory + "/root.der")
        try chain.writeRootCertificate(to: directory + "/root.pem")
        #expect(Array(try #require(FileManager.default.contents(atPath: directory + "/root.der"))) == chain.rootDER)
        let pem = try String(contentsOfFile: directory + "/root.pem", encoding: .utf8)
        #expect(try Certificate(pemEncoded: pem) == chain.root)
        #expect(throws: FakeSigningChainError.self) { try chain.writeRootCertificate(to: directory + "/missing/root.der") }
    }
}
