import EntitlementModel
import Foundation

/// A grant as the admin API shows it: the model's grant document plus who created and revoked it (key ids).
struct GrantRecord: Encodable, Equatable {
    var grant: Grant
    var createdBy: String
    var revokedBy: String?

    enum CodingKeys: String, CodingKey { case createdBy = "created_by", revokedBy = "revoked_by" }

    func encode(to encoder: any Encoder) throws {
        try grant.encode(to: encoder)
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(createdBy, forKey: .createdBy)
        try container.encode(revokedBy, forKey: .revokedBy)
    }
}
