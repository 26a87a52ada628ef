import Foundation
import Testing
@testable import EntitlementService
@testable import ServiceRuntime

/// Standard Webhooks signing, checked against the specification's own example (the `standardwebhooks`
/// package's `test_sign_function`), and the secret's rules.
@Suite struct WebhookSignerTests {
    @Test func signsTheSpecificationsExample() throws {
        let signer = try WebhookSigner(secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
        let body = Array(#"{"test": 2432232314}"#.utf8)
        #expect(signer.signature(id: "msg_p5jXN8AQM9LWM0D4loKWxJek", timestamp: 1_614_265_330, body: body)
            == "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=")
        let headers = Dictionary(uniqueKeysWithValues: signer.headers(id: "msg_p5jXN8AQM9LWM0D4loKWxJek", timestamp: 1_614_265_330, body: body))
        #expect(headers["webhook-id"] == "msg_p5jXN8AQM9LWM0D4loKWxJek")
        #expect(headers["webhook-timestamp"] == "1614265330")
        #expect(headers["webhook-signature"] == "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=")
        #expect(headers["Content-Type"] == "application/json")
    }

    @Test func everyPartIsSigned() throws {
        let signer = try WebhookSigner(secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
        let base = signer.signature(id: "a", timestamp: 1, body: Array("{}".utf8))
        #expect(signer.signature(id: "b", timestamp: 1, body: Array("{}".utf8)) != base)
        #expect(signer.signature(id: "a", timestamp: 2, body: Array("{}".utf8)) != base)
        #expect(signer.signature(id: "a", timestamp: 1, body: Array("{ }".utf8)) != base)
        let other = try WebhookSigner(secret: "whsec_" + Data(repeating: 7, count: 32).base64EncodedString())
        #expect(other.signature(id: "a", timestamp: 1, body: Array("{}".utf8)) != base)
    }

    @Test func secretsAreWhsecAndTheBase64Of24To64Bytes() throws {
        for count in [24, 32, 64] {
            let padded = Data((0..<count).map { UInt8($0) }).base64EncodedString()
            _ = try WebhookSigner(secret: "whsec_" + padded)
            _ = try WebhookSigner(secret: "whsec_" + padded.replacingOccurrences(of: "=", with: ""))
        }
        let rejected = [
            "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",  // no prefix
            "whsec_" + Data(count: 23).base64EncodedString(),
            "whsec_" + Data(count: 65).base64EncodedString(),
            "whsec_not*base64!",
            "whsec_",
        ]
        for secret in rejected {
            do {
                _ = try WebhookSigner(secret: secret)
                Issue.record("accepted \(secret)")
            } catch {
                #expect(error.variable == "WEBHOOK_SECRET")
                #expect(!error.problem.contains(secret.dropFirst(6)) || secret.count <= 6, "the secret is never quoted")
            }
        }
    }
}
