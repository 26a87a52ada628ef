import Synchronization

/// The last few JWS headers read, by their base64url text. The App Store sends the same header (`alg` and the
/// same `x5c`) with every payload a leaf signs, so a header is decoded, parsed and its certificates' base64
/// decoded once, not on every payload. A pure memo: a header's meaning depends on nothing but its text. When
/// full, it starts over.
final class JWSHeaderCache: Sendable {
    private let headers = Mutex<[SampledBytes: SignedJWS.Header]>([:])
    /// How many headers are kept at most.
    let capacity: Int

    init(capacity: Int) { self.capacity = capacity }

    /// The header whose base64url text is `segment`, parsed now unless it was before.
    func header(_ segment: ArraySlice<UInt8>) throws(SignedDataError) -> SignedJWS.Header {
        let key = SampledBytes(segment)
        if let header = headers.withLock({ $0[key] }) { return header }
        let header = try SignedJWS.Header(segment: segment)
        guard capacity > 0 else { return header }
        headers.withLock { headers in
            if headers.count >= capacity { headers.removeAll(keepingCapacity: true) }
            headers[key] = header
        }
        return header
    }
}
