import Testing
@testable import AppStore
@testable import EntitlementService
@testable import FakeAppStore
@testable import ServiceRuntime

/// Routing and problem documents, over the wire.
@Suite struct HTTPRoutingTests {
    @Test func unknownPathIs404Problem() async throws {
        let server = try await HTTPTestServer.start()
        let response = try await server.request("/nope")
        #expect(response.status == 404)
        #expect(response.headers["Content-Type"] == "application/problem+json")
        let json = try response.json()
        #expect(json["status"] as? Int == 404)
        #expect(json["title"] as? String == "Not Found")
        #expect(json["type"] as? String == "about:blank")
        #expect(json["detail"] is String)
        await server.shutdown()
    }

    @Test func knownPathWithOtherMethodIs405WithAllow() async throws {
        let server = try await HTTPTestServer.start()
        let response = try await server.request("/healthz", method: "POST", body: "{}")
        #expect(response.status == 405)
        #expect(response.headers["Allow"] == "GET, HEAD")
        #expect(try response.json()["status"] as? Int == 405)
        await server.shutdown()
    }

    @Test func pathParametersArePercentDecoded() async throws {
        let server = try await HTTPTestServer.start()
        let response = try await server.request("/v1/users/a%20b%2Fc%C3%A9/entitlements?at=2026-11-22T01%3A20%3A00%2B01%3A00")
        #expect(response.status == 200)
        let json = try response.json()
        #expect(json["user_id"] as? String == "a b/cé")
        #expect(json["at"] as? String == "2026-11-22T01:20:00+01:00")
        await server.shutdown()
    }

    @Test func literalSegmentsWinOverParameters() async throws {
        let server = try await HTTPTestServer.start()
        let literal = try await server.request("/v1/users/me/entitlements")
        #expect(try literal.json()["route"] as? String == "literal")
        let other = try await server.request("/v1/users/me/transactions")
        #expect(try other.json()["route"] as? String == "transactions")
        await server.shutdown()
    }

    @Test func malformedPercentEncodingInPathIs400() async throws {
        let server = try await HTTPTestServer.start()
        let response = try await server.request("/v1/users/%ZZ/entitlements")
        #expect(response.status == 400)
        #expect(try response.json()["field"] as? String == "user_id")
        await server.shutdown()
    }

    @Test func thrownProblemIsRenderedWithExtensions() async throws {
        let server = try await HTTPTestServer.start()
        let response = try await server.request("/problem")
        #expect(response.status == 422)
        #expect(response.headers["Content-Type"] == "application/problem+json")
        #expect(response.text == #"{"type":"about:blank","title":"Receipt rejected","status":422,"detail":"Apple rejected the receipt.","apple_status":21010}"#)
        await server.shutdown()
    }

    @Test func otherErrorsBecomeGeneric500WithoutDetail() async throws {
        let server = try await HTTPTestServer.start()
        let response = try await server.request("/boom")
        #expect(response.status == 500)
        #expect(response.headers["Content-Type"] == "application/problem+json")
        #expect(!response.text.contains("hunter2"))
        #expect(try response.json()["detail"] as? String == "The server failed to handle the request.")
        await server.shutdown()
    }

    @Test func decodeJSONNamesTheFieldOverTheWire() async throws {
        struct Consume: Decodable { var amount: Int; var idempotency_key: String }
        let server = try await HTTPTestServer.start { router in
            router.post("/consume") { request, _ in
                let body: Consume = try request.decodeJSON()
                return .json(["amount": body.amount])
            }
        }
        let wrongType = try await server.request("/consume", method: "POST", body: #"{"amount":"one","idempotency_key":"k"}"#)
        #expect(wrongType.status == 400)
        #expect(try wrongType.json()["field"] as? String == "amount")
        let null = try await server.request("/consume", method: "POST", body: "null")
        let nullDetail = try null.json()["detail"] as? String
        #expect(null.status == 400 && nullDetail == "The request body must be a JSON object.", "\(null.text)")
        let encoded = try await server.request("/consume", method: "POST", headers: [("Content-Encoding", "gzip")],
                                               body: #"{"amount":2,"idempotency_key":"k"}"#)
        let encodedField = try encoded.json()["field"] as? String
        #expect(encoded.status == 415 && encodedField == "Content-Encoding", "\(encoded.text)")
        let fine = try await server.request("/consume", method: "POST", body: #"{"amount":2,"idempotency_key":"k"}"#)
        #expect(fine.status == 200 && fine.text == #"{"amount":2}"#)
        await server.shutdown()
    }
}
