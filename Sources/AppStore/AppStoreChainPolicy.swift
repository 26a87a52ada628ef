import SwiftASN1
import X509

/// What Apple's `SignedDataVerifier` requires of a signing chain beyond RFC 5280 path validation, as a
/// swift-certificates `VerifierPolicy` (run with `RFC5280Policy`, which checks signatures, validity dates, CA
/// flags and path lengths, and refuses unknown critical extensions):
///
/// - the path is exactly leaf, intermediate, trusted root: x5c[1] is the only certificate between the leaf
///   and a configured root (Apple's Swift library insists on three; its Python library also takes a root
///   that itself carries the intermediate marker, a quirk not followed here);
/// - Apple's marker extensions, checked for presence only: 1.2.840.113635.100.6.11.1 on the leaf ("receipt
///   signing") and 1.2.840.113635.100.6.2.1 on the intermediate ("WWDR"); they are not listed as understood
///   critical extensions, so a critical marker is refused, as OpenSSL refuses it;
/// - the profile checks Apple's Python library gets from OpenSSL's `X509_STRICT` (and that RFC5280Policy
///   does not make): every issuer asserts keyCertSign; a certificate below the root has an
///   authorityKeyIdentifier; a CA has a subjectKeyIdentifier and a keyUsage; only a CA with keyCertSign has
///   a path length or keyCertSign; key identifiers are not critical; names are not empty; a
///   subjectAlternativeName names something;
/// - each certificate's authorityKeyIdentifier names its issuer, as OpenSSL's `X509_check_akid` requires of an
///   issuer: its key id is the issuer's subjectKeyIdentifier, its serial number and issuer name the issuer's.
///
/// The leaf's own key usage and CA flag are not checked: Apple's library checks no purpose either.
struct AppStoreChainPolicy: VerifierPolicy {
    /// 1.2.840.113635.100.6.11.1: Apple's "receipt signing" marker, required on the leaf.
    static let leafMarker: ASN1ObjectIdentifier = [1, 2, 840, 113635, 100, 6, 11, 1]
    /// 1.2.840.113635.100.6.2.1: Apple's "WWDR intermediate" marker, required on the intermediate.
    static let intermediateMarker: ASN1ObjectIdentifier = [1, 2, 840, 113635, 100, 6, 2, 1]

    let verifyingCriticalExtensions: [ASN1ObjectIdentifier] = []

    func chainMeetsPolicyRequirements(chain: UnverifiedCertificateChain) -> PolicyEvaluationResult {
        guard chain.count == 3 else {
            return .failsToMeetPolicy(reason: "the path to a trusted root is \(chain.count) certificate(s) long, not leaf, intermediate, root")
        }
        guard chain[0].extensions[oid: Self.leafMarker] != nil else {
            return .failsToMeetPolicy(reason: "x5c[0] lacks Apple's receipt-signing marker \(Self.leafMarker)")
        }
        guard chain[1].extensions[oid: Self.intermediateMarker] != nil else {
            return .failsToMeetPolicy(reason: "x5c[1] lacks Apple's intermediate marker \(Self.intermediateMarker)")
        }
        for (position, certificate) in chain.enumerated() {
            let name = ["x5c[0]", "x5c[1]", "the trusted root"][position]
            if let problem = Self.profileProblem(certificate, isIssuer: position > 0, isAnchor: position == 2) {
                return .failsToMeetPolicy(reason: "\(name) \(problem)")
            }
            if position < 2, let problem = Self.authorityProblem(certificate, issuer: chain[position + 1]) {
                return .failsToMeetPolicy(reason: "\(name)'s authorityKeyIdentifier \(problem)")
            }
        }
        return .meetsPolicy
    }

    /// What `certificate` breaks of the strict profile, nil when nothing.
    private static func profileProblem(_ certificate: Certificate, isIssuer: Bool, isAnchor: Bool) -> String? {
        let extensions = certificate.extensions
        let constraints: BasicConstraints?
        let usage: KeyUsage?
        let alternativeNames: SubjectAlternativeNames?
        do {
            constraints = try extensions.basicConstraints
            usage = try extensions.keyUsage
            alternativeNames = try extensions.subjectAlternativeNames
            _ = try extensions.subjectKeyIdentifier
            _ = try extensions.authorityKeyIdentifier
        } catch {
            return "has an undecodable extension (\(error))"
        }
        var isCA = false, hasPathLength = false
        if case .isCertificateAuthority(let maxPathLength) = constraints {
            isCA = true
            hasPathLength = maxPathLength != nil
        }
        let signsCertificates = usage?.keyCertSign == true
        if isIssuer && !signsCertificates { return "issues certificates but its keyUsage lacks keyCertSign" }
        if !isAnchor && extensions[oid: .X509ExtensionID.authorityKeyIdentifier] == nil { return "has no authorityKeyIdentifier" }
        if isCA && extensions[oid: .X509ExtensionID.subjectKeyIdentifier] == nil { return "is a CA without a subjectKeyIdentifier" }
        if isCA && usage == nil { return "is a CA without a keyUsage" }
        if hasPathLength && !signsCertificates { return "has a path length constraint without keyCertSign" }
        if !isCA && signsCertificates { return "asserts keyCertSign but is not a CA" }
        for oid in [ASN1ObjectIdentifier.X509ExtensionID.authorityKeyIdentifier, .X509ExtensionID.subjectKeyIdentifier]
        where extensions[oid: oid]?.critical == true {
            return "marks its key identifier extension \(oid) critical"
        }
        if certificate.issuer.isEmpty { return "has an empty issuer name" }
        if certificate.subject.isEmpty { return "has an empty subject name" }
        if alternativeNames?.isEmpty == true { return "has a subjectAlternativeName that names nothing" }
        return nil
    }

    /// What in `certificate`'s authorityKeyIdentifier names another certificate than `issuer`, nil when nothing.
    private static func authorityProblem(_ certificate: Certificate, issuer: Certificate) -> String? {
        guard let authority = try? certificate.extensions.authorityKeyIdentifier else { return nil }
        if let keyID = authority.keyIdentifier, let issuerKeyID = try? issuer.extensions.subjectKeyIdentifier?.keyIdentifier,
           keyID != issuerKeyID {
            return "names another key than its issuer's subjectKeyIdentifier"
        }
        if let serial = authority.authorityCertSerialNumber, serial != issuer.serialNumber {
            return "names another serial number than its issuer's"
        }
        let issuerName = authority.authorityCertIssuer?.lazy.compactMap { name -> DistinguishedName? in
            if case .directoryName(let directory) = name { directory } else { nil }
        }.first
        if let issuerName, issuerName != issuer.issuer {
            return "names another issuer than its issuer's"
        }
        return nil
    }
}
