import ServiceRuntime

extension ProblemError {
    /// The 409 of a post whose purchase `originalTransactionID` already belongs to another user under
    /// `RESTORE_POLICY=keep`: `source` says where the purchase came from (" in this receipt"), `outcome` what did not
    /// happen ("nothing was moved"); `extra` adds members besides `original_transaction_id`.
    static func ownershipConflict(_ originalTransactionID: String, source: String = "", outcome: String,
                                  extra: [String: JSONValue] = [:]) -> ProblemError {
        ProblemError(status: 409, title: "Purchase owned by another user",
                     detail: "The purchase \(originalTransactionID)\(source) already belongs to another user and RESTORE_POLICY is keep; \(outcome).",
                     extra: extra.merging(["original_transaction_id": .string(originalTransactionID)]) { _, new in new })
    }
}
