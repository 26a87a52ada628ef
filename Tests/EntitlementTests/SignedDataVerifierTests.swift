import Crypto
import Foundation
import Testing
import X509
@testable import AppStore

/// `SignedDataVerifier` on payloads signed by chains made for the test: the form of the JWS, the header, the
/// certificate chain and its dates, the signature and the registered claims, each with Apple's status.
@Suite struct SignedDataVerifierTests {
    let chain: TestSigningChain
    let verifier: SignedDataVerifier

    init() throws {
        chain = try TestSigningChain()
        verifier = .forTests(chain)
    }

    private func status(_ jws: String, _ verifier: SignedDataVerifier? = nil) async -> SignedDataError.Status? {
        let verifier = verifier ?? self.verifier
        return await refusal { () async throws(SignedDataError) in _ = try await verifier.verifyTransaction(jws) }?.status
    }

    private func parts(_ jws: String) -> [String] { jws.split(separator: ".", omittingEmptySubsequences: false).map(String.init) }

    @Test func aWellFormedSignedTransactionVerifiesAndDecodes() async throws {
        let payload = SignedPayloads.transaction()
        let verified = try await verifier.verifyTransaction(try chain.sign(payload))
        #expect(verified.payload.transaction.transactionID == "2000000812345678")
        #expect(verified.payload.bundleID == SignedPayloads.bundleID)
        #expect(verified.environment == .sandbox)
        #expect(verified.signedDate == Date(timeIntervalSince1970: try #require(payload["signedDate"] as? Double) / 1000))
        let json = try #require(try JSONSerialization.jsonObject(with: verified.json) as? [String: Any])
        #expect(json["productId"] as? String == "com.example.premium.monthly")
    }

    @Test func malformedCompactJWSIsAVerificationFailure() async throws {
        let good = try chain.sign(SignedPayloads.transaction())
        let (header, payload, signature) = (parts(good)[0], parts(good)[1], parts(good)[2])
        let standardAlphabet = signature.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
        // 64 bytes encode as 86 characters: the last holds 2 bits of data and 4 that must be zero.
        let lastCharacter = try #require(signature.last)
        let last = try #require(alphabet.firstIndex(of: lastCharacter))
        let nonCanonical = String(signature.dropLast()) + String(alphabet[last | 0b11])
        var malformed = [
            "", "hello world", header + "." + payload, good + ".AAAA", " " + good, good + "\n", "!!!.@@@.###",
            header + "." + payload + "." + signature + "==", header + "." + payload + "." + nonCanonical,
            TestSigningChain.base64URL(Data("{not json".utf8)) + "." + payload + "." + signature,
            try chain.sign(payloadBytes: Data("[1,2,3]".utf8)), try chain.sign(payloadBytes: Data("not json".utf8)),
        ]
        if standardAlphabet != signature { malformed.append(header + "." + payload + "." + standardAlphabet) }
        for jws in malformed {
            #expect(await status(jws) == .verificationFailure, "\(jws.prefix(60))")
        }
        #expect(await status(header + "." + payload + "." + signature) == nil)
    }

    @Test func theHeaderMustSayES256AndCarryAChainAndNoCrit() async throws {
        let payload = SignedPayloads.transaction()
        let x5c = try chain.x5c
        for header in [["alg": "ES256"], ["alg": "ES256", "x5c": [String]()], ["alg": "ES256", "x5c": "not a list"],
                       ["alg": "none", "x5c": x5c], ["alg": "es256", "x5c": x5c], ["alg": "ES384", "x5c": x5c], ["alg": "HS256", "x5c": x5c],
                       ["x5c": x5c], ["alg": "ES256", "x5c": x5c, "crit": ["exp-ext"], "exp-ext": 1],
                       ["alg": "ES256", "x5c": x5c, "kid": 123], ["alg": "ES256", "x5c": x5c, "kid": NSNull()],
                       ["alg": "ES256", "x5c": x5c, "b64": false]] as [[String: Any]] {
            #expect(await status(try chain.sign(payload, header: header)) == .verificationFailure, "\(header.keys.sorted())")
        }
        #expect(await status(try chain.sign(payload, header: ["alg": "ES256", "x5c": x5c, "typ": "JWT", "kid": "Apple_Key", "b64": true])) == nil)
    }

    @Test func x5cMustHoldExactlyThreeCertificatesOfWhichTheThirdIsNeverRead() async throws {
        let payload = SignedPayloads.transaction()
        let x5c = try chain.x5c
        for list in [[x5c[0]], Array(x5c[0...1]), x5c + [x5c[2]]] {
            #expect(await status(try chain.sign(payload, header: ["alg": "ES256", "x5c": list])) == .invalidChainLength)
        }
        let other = try TestSigningChain(name: "Other")
        for third in ["not even base64 !!!", try TestSigningChain.x5c(other.root), x5c[0]] {
            #expect(await status(try chain.sign(payload, header: ["alg": "ES256", "x5c": [x5c[0], x5c[1], third]])) == nil)
        }
    }

    @Test func x5cEntriesMustBeStrictBase64DER() async throws {
        let payload = SignedPayloads.transaction()
        let x5c = try chain.x5c
        let unpadded = x5c[0].hasSuffix("=") ? x5c[0].replacingOccurrences(of: "=", with: "") : String(x5c[0].dropLast())
        for list in [["%%%not base64%%%", x5c[1], x5c[2]], [Data("not a certificate".utf8).base64EncodedString(), x5c[1], x5c[2]],
                     [unpadded, x5c[1], x5c[2]], [x5c[0], "%%%", x5c[2]], [x5c[0] + "\n", x5c[1], x5c[2]]] {
            #expect(await status(try chain.sign(payload, header: ["alg": "ES256", "x5c": list])) == .invalidCertificate)
        }
        let noRoots = SignedDataVerifier(roots: [], bundleID: SignedPayloads.bundleID, appAppleID: nil)
        #expect(await status(try chain.sign(payload), noRoots) == .invalidCertificate)
    }

    @Test func theChainMustLeadToAConfiguredRootThroughX5c1() async throws {
        let payload = SignedPayloads.transaction()
        let stranger = try TestSigningChain(name: "Test")  // the same names, other keys: an impostor
        #expect(await status(try stranger.sign(payload)) == .verificationFailure)
        let x5c = try chain.x5c, strangerX5C = try stranger.x5c
        // A trusted root in x5c[2] does not make an untrusted intermediate trusted.
        #expect(await status(try stranger.sign(payload, header: ["alg": "ES256", "x5c": [strangerX5C[0], strangerX5C[1], x5c[2]]])) == .verificationFailure)
        // The leaf and intermediate swapped.
        #expect(await status(try chain.sign(payload, header: ["alg": "ES256", "x5c": [x5c[1], x5c[0], x5c[2]]])) == .verificationFailure)
        // Only the intermediate trusted: no partial chains.
        let intermediateOnly = SignedDataVerifier(roots: [chain.intermediate], bundleID: SignedPayloads.bundleID, appAppleID: nil)
        #expect(await status(try chain.sign(payload), intermediateOnly) == .verificationFailure)
        let twoRoots = SignedDataVerifier(roots: [stranger.root, chain.root], bundleID: SignedPayloads.bundleID, appAppleID: nil)
        #expect(await status(try chain.sign(payload), twoRoots) == nil)
    }

    @Test func aLeafIssuedByTheRootItselfIsNotAnAppStoreChain() async throws {
        // A leaf the root signed directly, sent with itself as "intermediate": the path would be two long.
        let leaf = try TestSigningChain.issue(chain.leaf.publicKey, subject: chain.leaf.subject, issuer: chain.root.subject,
                                              by: .init(chain.rootKey), validity: TestSigningChain.currentValidity,
                                              Array(chain.leaf.extensions))
        let x5c = try [leaf, leaf, chain.root].map(TestSigningChain.x5c)
        let jws = try chain.sign(SignedPayloads.transaction(), header: ["alg": "ES256", "x5c": x5c])
        #expect(await status(jws) == .verificationFailure)
    }

    @Test(arguments: TestSigningChain.Defect.allCases)
    func aChainBreakingApplesProfileIsRefused(_ defect: TestSigningChain.Defect) async throws {
        let broken = try TestSigningChain(defects: [defect])
        let error = await refusal { () async throws(SignedDataError) in
            _ = try await SignedDataVerifier.forTests(broken).verifyTransaction(try! broken.sign(SignedPayloads.transaction()))
        }
        #expect(error?.status == .verificationFailure, "\(defect): \(error?.reason ?? "accepted")")
    }

    @Test func aLeafWhoseKeyIsNotP256CannotSignES256() async throws {
        let p384 = try TestSigningChain(p384Leaf: true)
        let error = await refusal { () async throws(SignedDataError) in
            _ = try await SignedDataVerifier.forTests(p384).verifyTransaction(try! p384.sign(SignedPayloads.transaction()))
        }
        #expect(error == SignedDataError(.verificationFailure, "the leaf's key is not a P-256 key, as ES256 needs"))
    }

    @Test func theSignatureCoversHeaderAndPayloadAsRawRAndS() async throws {
        let payload = SignedPayloads.transaction()
        let good = try chain.sign(payload)
        let (header, body, signature) = (parts(good)[0], parts(good)[1], parts(good)[2])
        let otherBody = parts(try chain.sign(SignedPayloads.transaction(["productId": "com.example.lifetime"])))[1]
        let otherHeader = TestSigningChain.base64URL(try JSONSerialization.data(withJSONObject: ["alg": "ES256", "x5c": try chain.x5c, "kid": "x"]))
        let signatureBytes = try #require(Data(base64Encoded: signature.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/") + "=="))
        let der = try P256.Signing.ECDSASignature(rawRepresentation: signatureBytes).derRepresentation
        let strangerKey = P256.Signing.PrivateKey()
        let strangerSignature = try strangerKey.signature(for: Data((header + "." + body).utf8)).rawRepresentation
        for jws in [header + "." + otherBody + "." + signature, otherHeader + "." + body + "." + signature,
                    header + "." + body + "." + TestSigningChain.base64URL(der), header + "." + body + ".",
                    header + "." + body + "." + TestSigningChain.base64URL(signatureBytes.prefix(63)),
                    header + "." + body + "." + TestSigningChain.base64URL(strangerSignature)] {
            let error = await refusal { () async throws(SignedDataError) in _ = try await verifier.verifyTransaction(jws) }
            #expect(error == SignedDataError(.verificationFailure, "the ES256 signature does not verify with the leaf's key"))
        }
        // (r, n - s) verifies as well: plain ECDSA, as Apple's library, has no low-S rule.
        let n: [UInt8] = Array(Data(hex: "ffffffff00000000ffffffffffffffffbce6faada7179e84f3b9cac2fc632551"))
        let twin = Array(signatureBytes.prefix(32)) + Self.subtract(n, Array(signatureBytes.suffix(32)))
        #expect(await status(header + "." + body + "." + TestSigningChain.base64URL(twin)) == nil)
    }

    @Test func certificatesAreValidatedAtThePayloadsOwnSigningDate() async throws {
        let now = Date()
        let day: TimeInterval = 86_400
        let old = try TestSigningChain(leafValidity: now.addingTimeInterval(-3 * 365 * day)...now.addingTimeInterval(-365 * day))
        let ms = { (date: Date) in SignedPayloads.ms(date) }
        let oldVerifier = SignedDataVerifier.forTests(old)
        // Valid when signed two years ago, expired now: accepted (Apple's leaves expire, their payloads stay valid).
        #expect(await status(try old.sign(SignedPayloads.transaction(["signedDate": ms(now.addingTimeInterval(-2 * 365 * day))])), oldVerifier) == nil)
        #expect(await status(try old.sign(SignedPayloads.transaction(["signedDate": String(Int64(ms(now.addingTimeInterval(-2 * 365 * day))))])), oldVerifier) == nil)
        // Without a signing date (or with null) the chain is checked now.
        #expect(await status(try old.sign(SignedPayloads.transaction(removing: ["signedDate"])), oldVerifier) == .verificationFailure)
        #expect(await status(try old.sign(SignedPayloads.transaction(["signedDate": NSNull()])), oldVerifier) == .verificationFailure)
        #expect(await status(try chain.sign(SignedPayloads.transaction(removing: ["signedDate"]))) == nil)
        // receiptCreationDate stands in for a missing signedDate, for every kind; signedDate wins when both are there.
        let twoYearsAgo = ms(now.addingTimeInterval(-2 * 365 * day))
        #expect(await status(try old.sign(SignedPayloads.transaction(["receiptCreationDate": twoYearsAgo], removing: ["signedDate"])), oldVerifier) == nil)
        #expect(await status(try old.sign(SignedPayloads.transaction(["receiptCreationDate": twoYearsAgo])), oldVerifier) == .verificationFailure)
        // Not yet valid at the signing date, though valid now; and a signing date after the leaf's end.
        let young = try TestSigningChain(leafValidity: now.addingTimeInterval(-10 * day)...now.addingTimeInterval(365 * day))
        let youngVerifier = SignedDataVerifier.forTests(young)
        #expect(await status(try young.sign(SignedPayloads.transaction(["signedDate": ms(now.addingTimeInterval(-30 * day))])), youngVerifier) == .verificationFailure)
        #expect(await status(try young.sign(SignedPayloads.transaction(["signedDate": ms(now.addingTimeInterval(2 * 365 * day))])), youngVerifier) == .verificationFailure)
        #expect(await status(try young.sign(SignedPayloads.transaction(["signedDate": ms(now.addingTimeInterval(300 * day))])), youngVerifier) == nil)
        #expect(await status(try chain.sign(SignedPayloads.transaction(["signedDate": 0]))) == .verificationFailure)
        #expect(await status(try chain.sign(SignedPayloads.transaction(["signedDate": ms(now) + 0.7297]))) == nil)
        #expect(await status(try chain.sign(SignedPayloads.transaction(["signedDate": "yesterday"]))) == .verificationFailure)
        // Dates no certificate can be valid at (past 9999, before year 1) are refused, not handed to X.509 (which traps).
        for milliseconds in [253_402_300_800_000, 253_402_300_799_000, -99_999_999_999_999_999, Int64.max, Int64.min] as [Int64] {
            #expect(await status(try chain.sign(SignedPayloads.transaction(["signedDate": milliseconds]))) == .verificationFailure, "\(milliseconds)")
        }
        // The intermediate's and the root's windows count as much as the leaf's.
        let oldIntermediate = try TestSigningChain(intermediateValidity: now.addingTimeInterval(-4 * 365 * day)...now.addingTimeInterval(-300 * day),
                                                   leafValidity: now.addingTimeInterval(-3 * 365 * day)...now.addingTimeInterval(365 * day))
        #expect(await status(try oldIntermediate.sign(SignedPayloads.transaction(["signedDate": twoYearsAgo])), .forTests(oldIntermediate)) == nil)
        #expect(await status(try oldIntermediate.sign(SignedPayloads.transaction(["signedDate": ms(now.addingTimeInterval(-10 * day))])), .forTests(oldIntermediate)) == .verificationFailure)
        let oldRoot = try TestSigningChain(rootValidity: now.addingTimeInterval(-8 * 365 * day)...now.addingTimeInterval(-100 * day),
                                           intermediateValidity: now.addingTimeInterval(-7 * 365 * day)...now.addingTimeInterval(365 * day),
                                           leafValidity: now.addingTimeInterval(-6 * 365 * day)...now.addingTimeInterval(365 * day))
        #expect(await status(try oldRoot.sign(SignedPayloads.transaction(["signedDate": ms(now.addingTimeInterval(-365 * day))])), .forTests(oldRoot)) == nil)
        #expect(await status(try oldRoot.sign(SignedPayloads.transaction(["signedDate": ms(now.addingTimeInterval(-10 * day))])), .forTests(oldRoot)) == .verificationFailure)
    }

    @Test func registeredJWTClaimsThatRefuseThePayloadNowAreEnforced() async throws {
        let now = Date().timeIntervalSince1970
        for claims in [["exp": now - 86_400], ["nbf": now + 864_000], ["iat": now + 864_000], ["aud": "someone"], ["sub": 5], ["exp": "soon"],
                       ["exp": NSNull()], ["nbf": NSNull()], ["iat": NSNull()]] as [[String: Any]] {
            #expect(await status(try chain.sign(SignedPayloads.transaction(claims))) == .verificationFailure, "\(claims)")
        }
        for claims in [["exp": now + 86_400], ["nbf": now - 60], ["iat": now - 60], ["aud": ""], ["sub": "someone"]] as [[String: Any]] {
            #expect(await status(try chain.sign(SignedPayloads.transaction(claims))) == nil, "\(claims)")
        }
    }

    @Test func aVerifiedPayloadThatDoesNotDecodeNamesItsField() async throws {
        let error = await refusal { () async throws(SignedDataError) in
            _ = try await verifier.verifyTransaction(try! chain.sign(SignedPayloads.transaction(["quantity": "one"])))
        }
        #expect(error?.status == .undecodablePayload)
        #expect(error?.field == "quantity")
        let unknownFields = try chain.sign(SignedPayloads.transaction(["somethingNew": ["nested": true], "price": 4990]))
        #expect(await status(unknownFields) == nil)
    }

    /// `a - b` for big-endian unsigned numbers of the same length, `a` > `b`.
    private static func subtract(_ a: [UInt8], _ b: [UInt8]) -> [UInt8] {
        var result = [UInt8](repeating: 0, count: a.count)
        var borrow = 0
        for index in a.indices.reversed() {
            var digit = Int(a[index]) - Int(b[index]) - borrow
            borrow = digit < 0 ? 1 : 0
            if digit < 0 { digit += 256 }
            result[index] = UInt8(digit)
        }
        return result
    }
}

extension Data {
    /// The bytes `hex` spells, two digits each.
    init(hex: String) {
        var bytes: [UInt8] = []
        var index = hex.startIndex
        while index < hex.endIndex {
            let next = hex.index(index, offsetBy: 2)
            bytes.append(UInt8(hex[index..<next], radix: 16)!)
            index = next
        }
        self.init(bytes)
    }
}
