import ServiceRuntime

/// Bytes as a dictionary key (a certificate's DER, a JWS header): equal only when every byte is, hashed by
/// their count, their first 96 and their last 32 bytes. Hashing all of a 1–4 KB key on every lookup would cost
/// a good part of a cached verification; the ends already tell such keys apart (a certificate's serial number
/// near its start and its signature at its end; a header's leaf serial number near its start), and a
/// collision only costs a comparison.
struct SampledBytes: Hashable, Sendable {
    let bytes: ArraySlice<UInt8>

    init(_ bytes: ArraySlice<UInt8>) { self.bytes = bytes }

    func hash(into hasher: inout Hasher) {
        hasher.combine(bytes.count)
        bytes.withUnsafeBytes { all in
            hasher.combine(bytes: UnsafeRawBufferPointer(rebasing: all.prefix(96)))
            hasher.combine(bytes: UnsafeRawBufferPointer(rebasing: all.suffix(32)))
        }
    }

    static func == (left: SampledBytes, right: SampledBytes) -> Bool {
        left.bytes.withUnsafeBytes { a in right.bytes.withUnsafeBytes { b in a.sameBytes(as: b) } }
    }
}
