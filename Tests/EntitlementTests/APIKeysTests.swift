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

    @Test(arguments: ["BEARER app-key-one", "bEaReR \tapp-key-one \t", "Bearer   admin-key", "Bearer\tapp-key-one",
                      "Bearer app-key-one\u{2003}", "Bearer \u{3000}app-key-two", "Bearer app-key-one\u{301}", "Bearer app key-one",
                      "Bearer app-key-oné", "\u{2003}Bearer app-key-one"])
    func asciiAndOtherValuesAreReadAlike(header: String) {
        // Printable ASCII is read byte by byte, anything else by characters: both must agree with the
        // character reading (scheme in any case, then whitespace around the key trimmed).
        let scheme = "bearer "
        var expected: Caller?
        if header.count > scheme.count, header.prefix(scheme.count).lowercased() == scheme {
            let key = header.dropFirst(scheme.count).trimmingCharacters(in: .whitespaces)
            expected = ["app-key-one": Caller(scope: .app, keyID: "app#1"), "app-key-two": Caller(scope: .app, keyID: "app#2"),
                        "admin-key": Caller(scope: .admin, keyID: "admin#1")][key]
        }
        #expect(keys.authenticate(authorization: header) == expected)
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
