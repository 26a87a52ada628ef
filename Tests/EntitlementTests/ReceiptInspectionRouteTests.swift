import Foundation
import Testing
@testable import EntitlementService
@testable import FakeAppStore
@testable import ServiceRuntime

/// `POST /v1/admin/receipts/inspect` over HTTP against the real service: the shared samples' receipts read
/// locally, each purchase with its owner here, Apple never asked.
@Suite(.serialized, .timeLimit(.minutes(2)))
@Loop
struct ReceiptInspectionRouteTests {
    private func inspect(_ service: ServiceHarness, _ receiptData: String, key: String = ServiceHarness.adminKey) async throws -> RawHTTPClient.Response {
        let body = String(decoding: try JSONEncoder().encode(["receipt_data": receiptData]), as: UTF8.self)
        return try await service.request("POST", "/v1/admin/receipts/inspect", json: body, key: key)
    }

    private func sample(_ name: String) throws -> String {
        String(decoding: try Fixtures.data(name), as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    @Test func anAppReceiptShowsItsPurchasesAndWhoOwnsThem() async throws {
        try await ServiceHarness.run { service in
            _ = try await service.sql("INSERT INTO purchase_owners (original_transaction_id, user_id) VALUES ('1000000692878476', 'rc-user')")
            let answer = try await inspect(service, try sample("receipt_sandbox_autorenew_monthly_to_annual_revenuecat.b64"))
            #expect(answer.status == 200, "\(answer.text)")
            let body = try answer.json()
            #expect(body["format"] as? String == "app_receipt")
            #expect(body["bundle_id"] as? String == "com.revenuecat.sampleapp")
            #expect(body["for_this_app"] as? Bool == false)
            #expect(body["environment"] as? String == "Sandbox")
            #expect(body["created_at"] as? String == "2020-07-22T17:39:08Z")
            #expect(body["expires_at"] is NSNull)
            let purchases = try #require(body["purchases"] as? [[String: Any]])
            #expect(purchases.count == 9)
            #expect(purchases.allSatisfy { $0["original_transaction_id"] as? String == "1000000692878476" && $0["user_id"] as? String == "rc-user" })
            #expect(purchases.allSatisfy { ($0["purchase_date"] as? String)?.hasSuffix("Z") == true && $0["quantity"] as? Int == 1 })
            #expect(Set(purchases.compactMap { $0["product_id"] as? String }).count == 2)
            #expect(service.fake.state.counts.values.reduce(0, +) == 0)
        }
    }

    @Test func transactionAndXcodeReceiptsRead() async throws {
        try await ServiceHarness.run { service in
            let ios6 = try await inspect(service, try sample("receipt_ios6_transaction_sandbox_mindmob_inapppurchase.b64")).json()
            #expect(ios6["format"] as? String == "transaction_receipt" && ios6["environment"] as? String == "Sandbox")
            #expect(ios6["bundle_id"] as? String == "com.mindmobapp.MindMob" && ios6["application_version"] as? String == "20120427")
            let purchase = try #require((ios6["purchases"] as? [[String: Any]])?.first)
            #expect(purchase["transaction_id"] as? String == "1000000046178817" && purchase["user_id"] is NSNull)
            #expect(purchase["purchase_date"] as? String == "2012-04-30T15:05:55Z" && purchase["expires_date"] is NSNull)

            let empty = try await inspect(service, try sample("receipt_xcode_empty_applelib.b64")).json()
            #expect(empty["environment"] as? String == "Xcode" && (empty["purchases"] as? [Any])?.isEmpty == true)
            #expect(empty["expires_at"] as? String == "4001-01-01T00:00:00Z")
        }
    }

    /// Whitespace between base64 groups is tolerated, as in Apple's own line-wrapped receipts (and any Unicode
    /// whitespace, read by the slower path for text that is not ASCII).
    @Test func lineWrappedReceiptDataReads() async throws {
        try await ServiceHarness.run { service in
            let text = try sample("receipt_xcode_autorenew_applelib.b64")
            var groups: [String] = []
            var rest = Substring(text)
            while !rest.isEmpty { groups.append(String(rest.prefix(76))); rest = rest.dropFirst(76) }
            for wrapped in [groups.joined(separator: "\r\n"), " \t" + groups.joined(separator: "\n") + "\n", groups.joined(separator: "\u{2028}")] {
                let answer = try await inspect(service, wrapped)
                #expect(answer.status == 200, "\(answer.text)")
                #expect(try answer.json()["bundle_id"] as? String == "com.example.naturelab.backyardbirds.example")
            }
            #expect(try await inspect(service, groups.joined(separator: "\u{00E9}")).status == 422)
        }
    }

    @Test func whatDoesNotReadIsA422NamingTheField() async throws {
        try await ServiceHarness.run { service in
            for (receiptData, status, title) in [
                (Data("not a receipt".utf8).base64EncodedString(), 422, "Receipt unreadable"),
                (Data([0x30, 0x80, 0x06, 0x09]).base64EncodedString(), 422, "Receipt unreadable"),
                ("%%% not base64", 422, "Receipt rejected"),
                ("", 400, nil),
            ] {
                let answer = try await inspect(service, receiptData)
                #expect(answer.status == status, "\(receiptData): \(answer.text)")
                #expect(answer.headers["Content-Type"] == "application/problem+json")
                let problem = try answer.json()
                #expect(problem["field"] as? String == "receipt_data")
                if let title { #expect(problem["title"] as? String == title) }
            }
            // An app key may not inspect.
            #expect(try await inspect(service, try sample("receipt_xcode_empty_applelib.b64"), key: ServiceHarness.appKey).status == 403)
        }
    }
}
