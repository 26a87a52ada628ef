import Testing
@testable import ServiceRuntime

/// Request bodies that give a name twice in one object are found, with the field's path; names are compared with
/// their escapes decoded, and strings that are values, however they look, are never taken for names. A comma before
/// the end of an object or array, which Foundation's decoder lets through, is found too.
@Suite struct JSONLeniencyTests {
    @Test(arguments: [
        (#"{"user_id": "a", "user_id": "b"}"#, "user_id"),
        (#"{"user_id": "a", "user\u005fid": "b"}"#, "user_id"),
        (#"{"a": {"x": 1, "y": 2, "x": 3}}"#, "a.x"),
        (#"{"items": [{"p": 1}, {"p": 2, "p": 3}]}"#, "items[1].p"),
        (#"[{"k": 1}, [], {"k": 1, "k": 2}]"#, "[2].k"),
        (#"{"\ud83d\ude00": 1, "😀": 2}"#, "😀"),
    ])
    func aRepeatedNameIsFound(body: String, path: String) {
        #expect(JSONLeniency.first(in: Array(body.utf8)) == .repeatedName(path))
    }

    @Test(arguments: [
        #"{"user_id": "user_id", "receipt_data": "\"user_id\": 1"}"#,
        #"{"a": {"x": 1}, "b": {"x": 1}, "c": [{"x": 1}, {"x": 2}]}"#,
        #"{"a\"b": 1, "a": 2, "b": 3}"#,
        #"{"x": "\\", "y": "\\\"", "z": 1}"#,
        #"{"a": ",}", "b": [",]"], "c": "\\", "d": {}}"#,
        "[1, 2, 3]", "\"text\"", "{\"unterminated", "}}]]", "", "[]", "{ }",
    ])
    func distinctNamesAndNonJSONPass(body: String) {
        #expect(JSONLeniency.first(in: Array(body.utf8)) == nil)
    }

    @Test(arguments: [
        #"{"user_id": "a",}"#, "{\"a\": 1 ,\n\t}", #"{"x": [1, 2,]}"#, #"[{"k": 1},]"#, #"{"a": {"b": "}",},"c": 1}"#,
    ])
    func aTrailingCommaIsFound(body: String) {
        #expect(JSONLeniency.first(in: Array(body.utf8)) == .trailingComma)
    }

    @Test func aRouteRefusesADuplicateNamingTheFieldAndATrailingComma() async throws {
        struct Body: Decodable { var user_id: String }
        let server = try await HTTPTestServer.start { router in
            router.post("/named") { request, _ in .json(["user_id": try request.decodeJSON(Body.self).user_id]) }
        }
        let refused = try await server.request("/named", method: "POST", body: #"{"user_id": "a", "user_id": "b"}"#)
        #expect(refused.status == 400)
        #expect(try refused.json()["field"] as? String == "user_id")
        let comma = try await server.request("/named", method: "POST", body: #"{"user_id": "a",}"#)
        #expect(comma.status == 400)
        #expect(try comma.json()["detail"] as? String == "The request body is not valid JSON: a comma comes before '}' or ']'.")
        let fine = try await server.request("/named", method: "POST", body: #"{"user_id": "a"}"#)
        #expect(fine.status == 200)
        await server.shutdown()
    }
}
