import Testing
@testable import ServiceRuntime

/// Request bodies that give a name twice in one object are found, with the field's path; names are compared with
/// their escapes decoded, and strings that are values, however they look, are never taken for names.
@Suite struct JSONDuplicateNamesTests {
    @Test(arguments: [
        (#"{"user_id": "a", "user_id": "b"}"#, "user_id"),
        (#"{"user_id": "a", "user\u005fid": "b"}"#, "user_id"),
        (#"{"a": {"x": 1, "y": 2, "x": 3}}"#, "a.x"),
        (#"{"items": [{"p": 1}, {"p": 2, "p": 3}]}"#, "items[1].p"),
        (#"[{"k": 1}, [], {"k": 1, "k": 2}]"#, "[2].k"),
        (#"{"\ud83d\ude00": 1, "😀": 2}"#, "😀"),
    ])
    func aRepeatedNameIsFound(body: String, path: String) {
        #expect(JSONDuplicateNames.firstDuplicate(in: Array(body.utf8)) == path)
    }

    @Test(arguments: [
        #"{"user_id": "user_id", "receipt_data": "\"user_id\": 1"}"#,
        #"{"a": {"x": 1}, "b": {"x": 1}, "c": [{"x": 1}, {"x": 2}]}"#,
        #"{"a\"b": 1, "a": 2, "b": 3}"#,
        #"{"x": "\\", "y": "\\\"", "z": 1}"#,
        "[1, 2, 3]", "\"text\"", "{\"unterminated", "}}]]", "",
    ])
    func distinctNamesAndNonJSONPass(body: String) {
        #expect(JSONDuplicateNames.firstDuplicate(in: Array(body.utf8)) == nil)
    }

    @Test func aRouteRefusesADuplicateNamingTheField() async throws {
        struct Body: Decodable { var user_id: String }
        let server = try await HTTPTestServer.start { router in
            router.post("/named") { request, _ in .json(["user_id": try request.decodeJSON(Body.self).user_id]) }
        }
        let refused = try await server.request("/named", method: "POST", body: #"{"user_id": "a", "user_id": "b"}"#)
        #expect(refused.status == 400)
        #expect(try refused.json()["field"] as? String == "user_id")
        let fine = try await server.request("/named", method: "POST", body: #"{"user_id": "a"}"#)
        #expect(fine.status == 200)
        await server.shutdown()
    }
}
