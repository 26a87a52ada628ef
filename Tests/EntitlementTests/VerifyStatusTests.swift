import Foundation
import Testing
import EntitlementModel

@Suite struct VerifyStatusTests {
    @Test(arguments: [
        (0, VerifyStatus.ok),
        (21006, .okExpired),
        (21007, .redirect(to: .sandbox)),
        (21008, .redirect(to: .production)),
        (21002, .malformedOrTransient),
        (21003, .rejected),
        (21010, .rejected),
        (21000, .configurationError),
        (21004, .configurationError),
        (21005, .retryable),
        (21009, .retryable),
    ])
    func appleStatus(status: Int, expected: VerifyStatus) {
        #expect(VerifyStatus(appleStatus: status, isRetryable: nil) == expected)
        // The is-retryable flag only matters for 21100–21199.
        #expect(VerifyStatus(appleStatus: status, isRetryable: true) == expected)
        #expect(VerifyStatus(appleStatus: status, isRetryable: false) == expected)
    }

    @Test(arguments: [21100, 21150, 21199])
    func internalErrorsFollowTheRetryableFlag(status: Int) {
        #expect(VerifyStatus(appleStatus: status, isRetryable: true) == .retryable)
        #expect(VerifyStatus(appleStatus: status, isRetryable: false) == .rejected)
        #expect(VerifyStatus(appleStatus: status, isRetryable: nil) == .retryable)
    }

    @Test(arguments: [1, 21001, 21011, 21099, 21200, 30000, -1])
    func unknownStatusesAreRetryable(status: Int) {
        #expect(VerifyStatus(appleStatus: status, isRetryable: nil) == .retryable)
    }

    @Test func classifiesADecodedBodyByItsFlag() throws {
        let retryable = try AppStoreResponse(jsonData: Data(#"{"status": 21199, "is-retryable": 1}"#.utf8))
        let final = try AppStoreResponse(jsonData: Data(#"{"status": 21199, "is_retryable": false}"#.utf8))
        #expect(VerifyStatus(retryable) == .retryable)
        #expect(VerifyStatus(final) == .rejected)
    }

    @Test(arguments: [
        (TransportFailure.httpStatus(500), VerifyStatus.retryable),
        (.httpStatus(502), .retryable),
        (.httpStatus(503), .retryable),
        (.httpStatus(599), .retryable),
        (.httpStatus(408), .retryable),
        (.httpStatus(429), .retryable),
        (.httpStatus(301), .configurationError),
        (.httpStatus(401), .configurationError),
        (.httpStatus(404), .configurationError),
        (.timeout, .retryable),
        (.connectionError("Could not resolve host"), .retryable),
        (.undecodableBody("not JSON"), .retryable),
    ])
    func transportFailure(failure: TransportFailure, expected: VerifyStatus) {
        #expect(VerifyStatus(failure) == expected)
    }

    @Test func transportFailuresDescribeThemselves() {
        #expect(TransportFailure.httpStatus(503).description == "HTTP 503 from verifyReceipt")
        #expect(TransportFailure.timeout.description == "verifyReceipt timed out")
        #expect(TransportFailure.connectionError("TLS handshake failed").description.hasSuffix("TLS handshake failed"))
    }
}
