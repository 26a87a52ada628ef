import Foundation
import Synchronization
import Testing
@testable import AppStore

/// The verified-chain cache: a payload of a known chain skips path validation, yet the verdict is always the
/// one a verifier without the cache gives, whatever the payload's date; entries expire and make room.
@Suite struct VerifiedChainCacheTests {
    static let day: TimeInterval = 86_400

    /// A clock the test moves.
    final class TestClock: Sendable {
        private let current = Mutex(Date())
        var now: Date { current.withLock { $0 } }
        func advance(_ seconds: TimeInterval) { current.withLock { $0 = $0.addingTimeInterval(seconds) } }
    }

    private func accepts(_ verifier: SignedDataVerifier, _ jws: String) async -> Bool {
        await refusal { () async throws(SignedDataError) in _ = try await verifier.verifyTransaction(jws) } == nil
    }

    @Test func aKnownChainIsNotValidatedAgain() async throws {
        let chain = try TestSigningChain()
        let verifier = SignedDataVerifier.forTests(chain)
        for _ in 0..<3 { #expect(await accepts(verifier, try chain.sign(SignedPayloads.transaction()))) }
        #expect(verifier.chains.statistics == (hits: 2, misses: 1, count: 1))
        // A hit skips the chain, never the signature.
        let parts = try chain.sign(SignedPayloads.transaction()).split(separator: ".").map(String.init)
        let forged = parts[0] + "." + (try chain.sign(SignedPayloads.transaction(["productId": "x"])).split(separator: ".")[1]) + "." + parts[2]
        #expect(await !accepts(verifier, forged))
        #expect(verifier.chains.statistics.hits == 3)
    }

    /// Chains whose leaf, intermediate or root is valid for only part of the dates tried, each date's payload
    /// verified by a verifier that has the chain cached (from a payload inside its window) and by one without a
    /// cache: the verdicts must be the same, and some of each must be refusals.
    @Test func aHitAcceptsOnlyWhatAColdVerificationAccepts() async throws {
        let now = Date()
        let window = { (from: Double, to: Double) in now.addingTimeInterval(from * Self.day)...now.addingTimeInterval(to * Self.day) }
        let chains = [
            try TestSigningChain(name: "Old leaf", leafValidity: window(-3 * 365, -365)),
            try TestSigningChain(name: "Old intermediate", intermediateValidity: window(-4 * 365, -300), leafValidity: window(-3 * 365, 365)),
            try TestSigningChain(name: "Old root", rootValidity: window(-8 * 365, -100), intermediateValidity: window(-7 * 365, 365),
                                 leafValidity: window(-6 * 365, 365)),
            try TestSigningChain(name: "Young leaf", leafValidity: window(-10, 365)),
        ]
        let days: [Double?] = [-9 * 365, -7 * 365, -5 * 365, -2 * 365, -400, -365, -301, -200, -101, -50, -11, -9, -1, 0, 100, 364, 366, 400, nil]
        var accepted = 0, refused = 0
        for chain in chains {
            let warm = SignedDataVerifier.forTests(chain)
            let cold = SignedDataVerifier(roots: [chain.root], bundleID: SignedPayloads.bundleID, appAppleID: nil, chainCacheCapacity: 0)
            // Warm the cache with a payload signed where every certificate is valid.
            let leaf = chain.leaf, intermediate = chain.intermediate, root = chain.root
            let inside = max(leaf.notValidBefore, intermediate.notValidBefore, root.notValidBefore).addingTimeInterval(Self.day)
            #expect(await accepts(warm, try chain.sign(SignedPayloads.transaction(["signedDate": SignedPayloads.ms(inside)]))))
            for offset in days {
                let payload = offset.map { SignedPayloads.transaction(["signedDate": SignedPayloads.ms(now.addingTimeInterval($0 * Self.day))]) }
                    ?? SignedPayloads.transaction(removing: ["signedDate"])
                let jws = try chain.sign(payload)
                let coldVerdict = await accepts(cold, jws)
                #expect(await accepts(warm, jws) == coldVerdict, "\(chain.leaf.subject) at \(offset.map { "\($0) days" } ?? "now")")
                if coldVerdict { accepted += 1 } else { refused += 1 }
            }
            #expect(warm.chains.statistics.hits > 0)
            #expect(cold.chains.statistics.count == 0)
        }
        #expect(accepted > 10 && refused > 10)
    }

    @Test func entriesExpireAfterTheirLifetime() async throws {
        let chain = try TestSigningChain()
        let clock = TestClock()
        let verifier = SignedDataVerifier(roots: [chain.root], bundleID: SignedPayloads.bundleID, appAppleID: nil,
                                          chainCacheLifetime: 300, now: { clock.now })
        let jws = try chain.sign(SignedPayloads.transaction())
        #expect(await accepts(verifier, jws))
        clock.advance(299)
        #expect(await accepts(verifier, jws))
        #expect(verifier.chains.statistics == (hits: 1, misses: 1, count: 1))
        clock.advance(2)
        #expect(await accepts(verifier, jws))
        #expect(verifier.chains.statistics == (hits: 1, misses: 2, count: 1))
    }

    @Test func theLeastRecentlyUsedChainMakesRoom() async throws {
        let chains = try (0..<3).map { try TestSigningChain(name: "Chain \($0)") }
        let verifier = SignedDataVerifier(roots: chains.map(\.root), bundleID: SignedPayloads.bundleID, appAppleID: nil, chainCacheCapacity: 2)
        let jws = try chains.map { try $0.sign(SignedPayloads.transaction()) }
        #expect(await accepts(verifier, jws[0]))  // miss
        #expect(await accepts(verifier, jws[1]))  // miss
        #expect(await accepts(verifier, jws[0]))  // hit: chain 1 is now the least recently used
        #expect(await accepts(verifier, jws[2]))  // miss, evicts chain 1
        #expect(await accepts(verifier, jws[0]))  // hit
        #expect(await accepts(verifier, jws[1]))  // miss again
        #expect(verifier.chains.statistics == (hits: 2, misses: 4, count: 2))
    }
}
