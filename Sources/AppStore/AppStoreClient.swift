import ServiceRuntime
import EntitlementModel
import Foundation

/// Where to reach Apple's verifyReceipt and what to send it; the timeouts are the `HTTPClient`'s.
public struct AppStoreSettings: Sendable {
    /// The Production verifyReceipt URL (`APPLE_VERIFY_URL_PRODUCTION`, normally Apple's
    /// `https://buy.itunes.apple.com/verifyReceipt`).
    public var productionURL: String
    /// The Sandbox verifyReceipt URL (`APPLE_VERIFY_URL_SANDBOX`, normally Apple's
    /// `https://sandbox.itunes.apple.com/verifyReceipt`).
    public var sandboxURL: String
    /// The app's shared secret, sent as `password` with every request. Never logged.
    public var sharedSecret: String?
    /// A valid receipt of another bundle is rejected.
    public var bundleID: String?

    /// Settings with these URLs; without a shared secret no `password` is sent, without a bundle id any app's
    /// receipt is accepted.
    public init(productionURL: String, sandboxURL: String, sharedSecret: String? = nil, bundleID: String? = nil) {
        self.productionURL = productionURL
        self.sandboxURL = sandboxURL
        self.sharedSecret = sharedSecret
        self.bundleID = bundleID
    }
}

/// The verifyReceipt client: carries out the model's `VerificationFlow` over libcurl on the loop.
///
/// Each exchange posts `{"receipt-data", "password", "exclude-old-transactions": false}` to the environment
/// the flow names; the flow decides redirects (`21007`/`21008`), immediate repeats (`21002`) and the class of
/// the final answer. Every exchange is logged with Apple's status and the transport's detail, never the secret
/// or the receipt.
@Loop
public final class AppStoreClient: ReceiptVerifier {
    private let http: HTTPClient
    private let settings: AppStoreSettings

    /// A client that posts through `http` (whose timeouts apply) to the URLs of `settings`.
    public init(http: HTTPClient, settings: AppStoreSettings) {
        self.http = http
        self.settings = settings
    }

    /// Runs one `VerificationFlow` from `firstEnvironment`, redirects and `21002` repeats included; transport
    /// failures end up in the result, nothing throws.
    public func verify(receiptData: String, firstEnvironment: StoreEnvironment) async -> VerificationFlow.Result {
        var flow = VerificationFlow(firstEnvironment: firstEnvironment, expectedBundleID: settings.bundleID)
        let body = Self.requestBody(receiptData: receiptData, password: settings.sharedSecret)
        var action = flow.start()
        while true {
            switch action {
            case .send, .retrySameEnvironment:
                action = flow.received(await exchange(body, environment: flow.environment!))
            case .finish(let result):
                return result
            }
        }
    }

    /// One request to one environment's endpoint, reduced to what the flow needs.
    private func exchange(_ body: [UInt8], environment: StoreEnvironment) async -> VerificationFlow.Outcome {
        let url = environment == .production ? settings.productionURL : settings.sandboxURL
        let started = EventLoop.shared.now
        let outcome: VerificationFlow.Outcome
        do {
            let response = try await http.post(url: url, body: body, headers: [("Content-Type", "application/json"), ("Accept", "application/json")])
            if response.status != 200 {
                outcome = .failed(.httpStatus(response.status))
            } else {
                do {
                    outcome = .answered(try AppStoreResponse(jsonData: Data(response.body)))
                } catch {
                    outcome = .failed(.undecodableBody(error.description))
                }
            }
        } catch {
            outcome = .failed(error.kind == .timeout ? .timeout : .connectionError(error.description))
        }
        let elapsed = EventLoop.shared.now &- started
        switch outcome {
        case .answered(let answer):
            Log.info("apple_verify", ["environment": environment.rawValue, "apple_status": answer.status, "duration_ms": elapsed])
        case .failed(let failure):
            Log.warning("apple_verify_failed", ["environment": environment.rawValue, "failure": failure.description, "duration_ms": elapsed])
        }
        return outcome
    }

    /// The JSON body of a verifyReceipt request: `{"exclude-old-transactions":false,"password":…,"receipt-data":…}`.
    ///
    /// Receipt data is base64 (tens of kilobytes), which JSON needs no escaping for, so it is copied in as
    /// bytes; receipt data with anything else in it goes through `JSONValue`'s escaping.
    static func requestBody(receiptData: String, password: String?) -> [UInt8] {
        var body: [String: JSONValue] = ["exclude-old-transactions": .bool(false)]
        if let password { body["password"] = .string(password) }
        let plain = receiptData.utf8.withContiguousStorageIfAvailable { $0.allSatisfy(needsNoEscaping) }
            ?? receiptData.utf8.allSatisfy(needsNoEscaping)
        guard plain else {
            body["receipt-data"] = .string(receiptData)
            return Array(JSONValue.object(body).jsonText.utf8)
        }
        // "receipt-data" sorts after the other keys, so the text is what `jsonText` would write.
        var bytes = Array(JSONValue.object(body).jsonText.utf8.dropLast())
        bytes.reserveCapacity(bytes.count + receiptData.utf8.count + 20)
        bytes += #","receipt-data":""#.utf8
        bytes += receiptData.utf8
        bytes += #""}"#.utf8
        return bytes
    }

    /// Printable ASCII other than `"` and `\`: written into a JSON string as is.
    private static func needsNoEscaping(_ byte: UInt8) -> Bool {
        byte >= 0x20 && byte < 0x7F && byte != UInt8(ascii: "\"") && byte != UInt8(ascii: "\\")
    }
}
