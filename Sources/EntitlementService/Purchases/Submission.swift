import EntitlementModel
import Foundation

/// Where a receipt submission stands (`GET /v1/receipts/{verification_id}`).
enum SubmissionStatus: String, Sendable, Codable {
    /// Stored; Apple has not given a final answer yet.
    case pending
    /// Apple accepted it and its purchases were recorded.
    case verified
    /// Apple, or a local check, rejected it (or its purchase belongs to someone else under `keep`).
    case invalid
    /// Apple says our configuration is wrong (`21004`, `21000`); retried after the operator fixes it.
    case failed
}

/// One stored receipt submission as its poster may see it: everything but the receipt.
struct Submission: Sendable {
    var verificationID: UUID
    var userID: String
    var orderID: UUID?
    var status: SubmissionStatus
    var appleStatus: Int?
    var environment: StoreEnvironment?
    var attempts: Int
    var createdAt: Date
    var updatedAt: Date
}

/// Where the attempt on a submission stands, as a process that did not make it sees it.
enum SubmissionAttemptState: Sendable, Equatable {
    /// A live lease holds it: another process is asking Apple now.
    case held
    /// A lease ran out without an answer (its holder died): anyone may claim it.
    case lapsed
    /// No attempt holds it: it ended (or was given up) in `status`, with Apple's status and the detail kept.
    case settled(SubmissionStatus, appleStatus: Int?, environment: StoreEnvironment?, detail: String?)
}

/// One lease on a submission: the right to ask Apple about it and write the answer. Every claim draws a new
/// `claimID`, and every write of the lease holder names it, so an attempt whose lease ran out and was claimed
/// again writes nothing when its answer comes late.
struct SubmissionClaim: Sendable, Hashable {
    var verificationID: UUID
    var claimID: UUID
}

/// A submission claimed for one verification attempt: what the attempt needs to ask Apple and record.
struct ClaimedSubmission: Sendable {
    var claim: SubmissionClaim
    var userID: String
    var receiptData: String
    var orderID: UUID?
    /// Attempts so far, this one included (the retry backoff grows with it).
    var attempts: Int

    var verificationID: UUID { claim.verificationID }
}
