import Foundation
import Testing
@testable import AppStore
@testable import EntitlementService
@testable import FakeAppStore
@testable import ServiceRuntime

/// The one `/v1` route Apple calls: it carries no bearer key (it is checked by password or signature).
private let appleRoute = "/v1/notifications/app-store"

private let httpMethods: Set<String> = ["get", "put", "post", "delete", "options", "head", "patch", "trace"]

/// One operation of the document.
private struct Operation {
    var method: String
    var path: String
    var body: [String: Any]

    /// `GET /v1/orders/{order_id}`: as the router names its routes (and the log and metrics label them).
    var route: String { "\(method.uppercased()) \(path)" }
}

private func document() throws -> [String: Any] {
    let parsed = try JSONSerialization.jsonObject(with: Data(PackageResources.openapi_json))
    return try #require(parsed as? [String: Any])
}

private func operations(in document: [String: Any]) throws -> [Operation] {
    let paths = try #require(document["paths"] as? [String: Any])
    var result: [Operation] = []
    for (path, item) in paths {
        let item = try #require(item as? [String: Any], "\(path)")
        for (method, operation) in item where httpMethods.contains(method) {
            result.append(Operation(method: method, path: path, body: try #require(operation as? [String: Any])))
        }
    }
    return result
}

/// Every value of a `$ref` key anywhere in `value`.
private func references(in value: Any) -> [String] {
    switch value {
    case let object as [String: Any]:
        let own = (object["$ref"] as? String).map { [$0] } ?? []
        return own + object.values.flatMap(references(in:))
    case let array as [Any]:
        return array.flatMap(references(in:))
    default:
        return []
    }
}

/// The value a local reference (`#/a/b`) points at, per RFC 6901; nil when it points at nothing.
private func resolve(_ reference: String, in document: [String: Any]) -> Any? {
    guard reference.hasPrefix("#/") else { return nil }
    var current: Any = document
    for token in reference.dropFirst(2).split(separator: "/", omittingEmptySubsequences: false) {
        let key = token.replacingOccurrences(of: "~1", with: "/").replacingOccurrences(of: "~0", with: "~")
        if let object = current as? [String: Any], let next = object[key] {
            current = next
        } else if let array = current as? [Any], let index = Int(key), array.indices.contains(index) {
            current = array[index]
        } else {
            return nil
        }
    }
    return current
}

/// The parameters an operation declares, references resolved.
private func parameters(of operation: Operation, in document: [String: Any]) -> [[String: Any]] {
    (operation.body["parameters"] as? [[String: Any]] ?? []).compactMap { parameter in
        guard let reference = parameter["$ref"] as? String else { return parameter }
        return resolve(reference, in: document) as? [String: Any]
    }
}

/// The status codes an operation documents.
private func statuses(of operation: Operation) -> Set<String> {
    Set((operation.body["responses"] as? [String: Any] ?? [:]).keys)
}

@Suite struct OpenAPIDocumentTests {
    @Test func isOpenAPI31WithInfoAndARelativeServer() throws {
        let document = try document()
        #expect(document["openapi"] as? String == "3.1.0")
        let info = try #require(document["info"] as? [String: Any])
        #expect(info["title"] is String)
        #expect(info["version"] is String)
        let servers = try #require(document["servers"] as? [[String: Any]])
        #expect(servers.map { $0["url"] as? String } == ["/"])
    }

    @Test func bearerIsAnHTTPSecurityScheme() throws {
        let components = try #require(try document()["components"] as? [String: Any])
        let schemes = try #require(components["securitySchemes"] as? [String: Any])
        let bearer = try #require(schemes["bearer"] as? [String: Any])
        #expect(bearer["type"] as? String == "http")
        #expect(bearer["scheme"] as? String == "bearer")
    }

    @Test func everyReferenceResolves() throws {
        let document = try document()
        let references = Set(references(in: document))
        #expect(references.count > 20)
        for reference in references.sorted() {
            #expect(resolve(reference, in: document) != nil, "\(reference) points at nothing")
        }
    }

    @Test func everyKeyedRouteNeedsTheBearerKeyAndDocumentsItsRefusals() throws {
        let keyed = try operations(in: document()).filter { $0.path.hasPrefix("/v1/") && $0.path != appleRoute }
        #expect(!keyed.isEmpty)
        for operation in keyed {
            let security = operation.body["security"] as? [[String: Any]] ?? []
            #expect(security.count == 1 && security.first?["bearer"] != nil, "\(operation.route) has no bearer security")
            let codes = statuses(of: operation)
            #expect(codes.contains("401"), "\(operation.route)")
            #expect(codes.contains("403") == operation.path.hasPrefix("/v1/admin/"), "\(operation.route): 403 on admin routes only")
        }
    }

    @Test func theAppleRouteTakesNoBearerKeyButRefusesBadPasswordsWith401() throws {
        let operation = try #require(try operations(in: document()).first { $0.path == appleRoute })
        #expect((operation.body["security"] as? [Any])?.isEmpty == true)
        #expect(statuses(of: operation).contains("401"))
    }

    /// A route answers 400 only to input it reads (path, query, body), or, behind a key, to a query giving a name
    /// twice; 413 only to a body it reads, and 415 to an encoded one.
    @Test func routesWithInputDocument400AndWithABody413AndOnlyThose() throws {
        let document = try document()
        for operation in try operations(in: document) {
            let takesBody = operation.body["requestBody"] != nil
            let keyed = operation.path.hasPrefix("/v1/") && operation.path != appleRoute
            let takesInput = takesBody || keyed || !parameters(of: operation, in: document).isEmpty
            #expect(statuses(of: operation).contains("400") == takesInput, "\(operation.route)")
            #expect(statuses(of: operation).contains("413") == takesBody, "\(operation.route)")
            // A JSON body read by the service refuses a Content-Encoding (Apple's notifications are read as sent).
            #expect(statuses(of: operation).contains("415") == (takesBody && operation.path != appleRoute), "\(operation.route)")
        }
    }

    @Test func everyPathParameterIsDeclaredAndRequired() throws {
        let document = try document()
        for operation in try operations(in: document) {
            let inPath = Set(operation.path.split(separator: "/").filter { $0.hasPrefix("{") }.map { String($0.dropFirst().dropLast()) })
            let declared = parameters(of: operation, in: document).filter { $0["in"] as? String == "path" }
            #expect(Set(declared.compactMap { $0["name"] as? String }) == inPath, "\(operation.route)")
            #expect(declared.allSatisfy { $0["required"] as? Bool == true }, "\(operation.route)")
        }
    }

    /// The members every problem answer carries are the ones the document requires of a problem.
    @Test func problemRequiresExactlyTheMembersEveryProblemCarries() throws {
        let components = try #require(try document()["components"] as? [String: Any])
        let problem = try #require((components["schemas"] as? [String: Any])?["Problem"] as? [String: Any])
        let sent = try JSONSerialization.jsonObject(with: Data(ProblemError(status: 400, detail: "x").jsonText.utf8)) as? [String: Any]
        #expect(Set(problem["required"] as? [String] ?? []) == Set(try #require(sent).keys))
    }

    @Test func publicRoutesNeedNoKey() throws {
        let open = try operations(in: document()).filter { !$0.path.hasPrefix("/v1/") }
        #expect(open.count == 7)
        for operation in open {
            #expect((operation.body["security"] as? [Any])?.isEmpty == true, "\(operation.path)")
        }
    }

    @Test func receiptSubmissionDocumentsEveryOutcomeOfTheContract() throws {
        let operation = try #require(try operations(in: document()).first { $0.path == "/v1/receipts" })
        #expect(statuses(of: operation).isSuperset(of: ["200", "202", "400", "401", "409", "413", "422", "502"]))
    }

    @Test func metricsAreTextAndReadinessMayBeUnavailable() throws {
        let all = try operations(in: document())
        let metrics = try #require(all.first { $0.path == "/metrics" })
        let metricsOK = try #require((metrics.body["responses"] as? [String: Any])?["200"] as? [String: Any])
        #expect((metricsOK["content"] as? [String: Any])?.keys.sorted() == ["text/plain"])
        let readiness = try #require(all.first { $0.path == "/readyz" })
        #expect(statuses(of: readiness) == ["200", "503"])
    }
}

/// The document against the real service: what `GET /openapi.json` serves, and the routes its router holds.
@Suite(.serialized, .timeLimit(.minutes(2)))
@Loop
struct OpenAPIServedRoutesTests {
    /// The service serves the embedded document byte for byte, and that document names exactly the routes the
    /// service's router holds: a route added without its documentation (or documentation left behind by a
    /// removed route) fails here.
    @Test func theServedDocumentNamesExactlyTheRoutesTheServiceServes() async throws {
        let (response, routes) = try await ServiceHarness.run { service in
            (try await service.request("GET", "/openapi.json", key: nil), service.application.server.router.routes)
        }
        #expect(response.status == 200)
        #expect(response.headers["Content-Type"] == "application/json")
        #expect(response.body == PackageResources.openapi_json)

        let served = Set(routes.map { "\($0.method) \($0.pattern)" })
        let documented = Set(try operations(in: response.json()).map(\.route))
        #expect(served.count > 10)
        #expect(served.subtracting(documented).sorted() == [], "routes the service serves that the document lacks")
        #expect(documented.subtracting(served).sorted() == [], "operations the document names that no route serves")
    }
}
