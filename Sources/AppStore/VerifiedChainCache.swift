import Crypto
import Foundation
import Synchronization
import X509

/// Signing chains that passed path validation, so that the next payload of the same leaf and intermediate
/// costs one ECDSA verification instead of a chain build.
///
/// An entry is keyed by the DER of the leaf and of the intermediate and remembers the leaf's key and the
/// window in which every certificate of the validated path (leaf, intermediate, root) is valid: the latest
/// `notBefore` to the earliest `notAfter`. Validation depends on each payload's own date, so a hit counts only
/// when that date is inside the window; outside it the chain is validated again, exactly as on a miss. Nothing
/// else in path validation depends on the payload, so a hit accepts only what validation would accept.
///
/// Entries live `lifetime` seconds from their validation and at most `capacity` are kept, the least recently
/// used going first. Safe to share between threads (one lock, held for a dictionary access).
final class VerifiedChainCache: Sendable {
    /// The leaf's and the intermediate's DER.
    struct Key: Hashable, Sendable {
        var leaf: SampledBytes
        var intermediate: SampledBytes

        /// The leaf alone tells chains apart (it names its issuer); equality still compares both.
        func hash(into hasher: inout Hasher) { hasher.combine(leaf) }
    }

    /// A validated path: the leaf's key and where the path is valid.
    struct Entry: Sendable {
        var leafKey: P256.Signing.PublicKey
        var validFrom: Date
        var validUntil: Date
        var expires: Date
        var lastUse: UInt64
    }

    private struct State {
        var entries: [Key: Entry] = [:]
        var clock: UInt64 = 0
        var hits = 0
        var misses = 0
    }

    /// How many chains are kept at most; 0 keeps none.
    let capacity: Int
    /// How long a validated chain is trusted without validating it again, in seconds.
    let lifetime: TimeInterval
    private let state = Mutex(State())

    /// A cache of at most `capacity` chains, each kept `lifetime` seconds.
    init(capacity: Int, lifetime: TimeInterval) {
        self.capacity = capacity
        self.lifetime = lifetime
    }

    /// The leaf key of the chain `key` names when it was validated less than `lifetime` before `now` and its
    /// window holds `date`; nil otherwise (the caller validates the chain).
    func leafKey(_ key: Key, at date: Date, now: Date) -> P256.Signing.PublicKey? {
        state.withLock { state in
            state.clock &+= 1
            guard var entry = state.entries[key], entry.expires > now, entry.validFrom <= date, date <= entry.validUntil else {
                state.misses += 1
                return nil
            }
            state.hits += 1
            entry.lastUse = state.clock
            state.entries[key] = entry
            return entry.leafKey
        }
    }

    /// Remembers that `chain` (leaf first, root last) was validated at `now` and that `leafKey` is its leaf's key.
    func insert(_ key: Key, chain: some Sequence<Certificate>, leafKey: P256.Signing.PublicKey, now: Date) {
        guard capacity > 0 else { return }
        let validFrom = chain.map(\.notValidBefore).max() ?? .distantFuture
        let validUntil = chain.map(\.notValidAfter).min() ?? .distantPast
        state.withLock { state in
            state.clock &+= 1
            if state.entries[key] == nil, state.entries.count >= capacity {
                state.entries = state.entries.filter { $0.value.expires > now }
                if state.entries.count >= capacity, let oldest = state.entries.min(by: { $0.value.lastUse < $1.value.lastUse }) {
                    state.entries[oldest.key] = nil
                }
            }
            state.entries[key] = Entry(leafKey: leafKey, validFrom: validFrom, validUntil: validUntil,
                                       expires: now.addingTimeInterval(lifetime), lastUse: state.clock)
        }
    }

    /// How many lookups found a usable chain and how many did not; how many chains are kept.
    var statistics: (hits: Int, misses: Int, count: Int) {
        state.withLock { ($0.hits, $0.misses, $0.entries.count) }
    }
}
