import Testing
@testable import AppStore
@testable import EntitlementService
@testable import FakeAppStore
@testable import ServiceRuntime

@Suite struct APIKeysTests {
    let keys = APIKeys(appKeys: ["app-key-one", "app-key-two"], adminKeys: ["admin-key"])

    @Test func bearerKeysMapToTheirScopeAndID() {
        #expect(keys.authenticate(authorization: "Bearer app-key-two") == Caller(scope: .app, keyID: "app#2"))
        #expect(keys.authenticate(authorization: "bearer admin-key") == Caller(scope: .admin, keyID: "admin#1"))
    }

    @Test(arguments: [nil, "", "Bearer", "Bearer ", "Basic app-key-one", "Bearer app-key-on", "Bearer app-key-one2", "app-key-one"])
    func anythingElseIsRejected(header: String?) {
        #expect(keys.authenticate(authorization: header) == nil)
    }

    @Test func comparisonIsExact() {
        #expect(APIKeys.constantTimeEqual(Array("abc".utf8), Array("abc".utf8)))
        #expect(!APIKeys.constantTimeEqual(Array("abc".utf8), Array("abd".utf8)))
        #expect(!APIKeys.constantTimeEqual(Array("abc".utf8), Array("abc\0".utf8)))
        #expect(!APIKeys.constantTimeEqual([], Array("a".utf8)))
    }
}
