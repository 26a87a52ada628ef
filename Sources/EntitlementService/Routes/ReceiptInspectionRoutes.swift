import ServiceRuntime
import EntitlementModel

/// `POST /v1/admin/receipts/inspect` `{"receipt_data"}`: a receipt a customer sent support, read locally (an app
/// receipt or an iOS 6 transaction receipt; see ``ReceiptInspectionBody``) without asking Apple, with the owner
/// here of each purchase it holds. Registered under `/v1/admin` (an admin key). A receipt that does not read is a
/// 422 naming `receipt_data` and what is wrong; nothing is stored either way.
@Loop
struct ReceiptInspectionRoutes {
    let db: PostgresPool
    /// `APPLE_BUNDLE_ID`, for `for_this_app`.
    let bundleID: String?
    let ownerStore = OwnerStore()

    func register(on admin: RouterGroup) {
        admin.post("/receipts/inspect") { request, _ in try await inspect(request) }
    }

    private struct InspectBody: Decodable {
        var receiptData: String
        enum CodingKeys: String, CodingKey { case receiptData = "receipt_data" }
    }

    private func inspect(_ request: HTTPRequest) async throws -> HTTPResponse {
        let bytes = try InputRules.receiptBytes(try request.decodeJSON(InspectBody.self).receiptData)
        let receipt: LocalReceipt
        do {
            receipt = try LocalReceipt(bytes)
        } catch {
            throw ProblemError(status: 422, title: "Receipt unreadable", detail: "'receipt_data' is not a receipt this service reads: \(error)",
                               extra: ["field": "receipt_data"])
        }
        let owners = try await ownerStore.owners(of: ReceiptInspectionBody.originalTransactionIDs(of: receipt), on: db)
        return .json(ReceiptInspectionBody(receipt: receipt, forThisApp: bundleID.map { $0 == receipt.bundleID }, owners: owners))
    }
}
