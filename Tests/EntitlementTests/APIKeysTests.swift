import Testing
import Foundation
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

    @Test(arguments: [("BEARER app-key-one", Caller(scope: .app, keyID: "app#1")), ("bEaReR \tapp-key-one \t", Caller(scope: .app, keyID: "app#1")),
                      ("Bearer   admin-key", Caller(scope: .admin, keyID: "admin#1")), ("Bearer \t app-key-two", Caller(scope: .app, keyID: "app#2"))])
    func theSchemeInAnyCaseAndSpacesOrTabsAroundTheKeyAreTaken(header: String, caller: Caller) {
        #expect(keys.authenticate(authorization: header) == caller, "\(header)")
    }

    /// Only HTTP's whitespace (space, tab) is trimmed: a key with any other byte around or inside it (Unicode
    /// spaces, a combining mark) is not a configured key, byte for byte.
    @Test(arguments: ["Bearer app-key-one\u{2003}", "Bearer \u{3000}app-key-two", "Bearer app-key-one\u{A0}", "Bearer app-key-one\u{301}",
                      "Bearer app key-one", "Bearer app-key-oné", "\u{2003}Bearer app-key-one", "Bearer\u{A0}app-key-one"])
    func anyOtherByteMakesAnotherKey(header: String) {
        #expect(keys.authenticate(authorization: header) == nil, "\(header)")
    }

    @Test func theActorLogFieldNamesTheKeyID() {
        #expect(keys.entry(authorization: "Bearer app-key-two")?.logMetadata.map { "\($0.key)=\($0.value)" } == ["actor=app#2"])
    }

    @Test func comparisonIsExact() {
        #expect(APIKeys.constantTimeEqual(Array("abc".utf8), Array("abc".utf8)))
        #expect(!APIKeys.constantTimeEqual(Array("abc".utf8), Array("abd".utf8)))
        #expect(!APIKeys.constantTimeEqual(Array("abc".utf8), Array("abc\0".utf8)))
        #expect(!APIKeys.constantTimeEqual([], Array("a".utf8)))
    }
}
