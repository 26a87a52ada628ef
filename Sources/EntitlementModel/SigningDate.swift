import Foundation

/// When the App Store signed a payload, read before its signature is verified so that the certificates can be
/// checked as of that instant (the leaf certificates of older payloads have since expired).
public enum SigningDate {
    /// The payload's `signedDate`; for a notification without one (early DID_RENEW payloads), the `signedDate`
    /// of its `data.signedTransactionInfo` or else `data.signedRenewalInfo`. Nil when none is readable.
    public static func of(payload: Data) -> Date? {
        guard let probe = try? JSONDecoder().decode(Probe.self, from: payload) else { return nil }
        if let date = probe.signedDate { return date }
        for nested in [probe.data?.signedTransactionInfo, probe.data?.signedRenewalInfo].compactMap({ $0 }) {
            if let jws = try? CompactJWS(nested), let date = try? JSONDecoder().decode(Probe.self, from: jws.payload).signedDate {
                return date
            }
        }
        return nil
    }

    private struct Probe: Decodable {
        var signedDate: Date?
        var data: NestedPayloads?

        private enum CodingKeys: String, CodingKey { case signedDate, data }

        init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            signedDate = try container.appleMilliseconds(.signedDate)
            data = try? container.decodeIfPresent(NestedPayloads.self, forKey: .data)
        }
    }

    private struct NestedPayloads: Decodable {
        var signedTransactionInfo: String?
        var signedRenewalInfo: String?
    }
}
