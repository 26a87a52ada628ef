import Foundation
import Testing
@testable import EntitlementService

/// Every method and path of the route table in API.md, as OpenAPI writes them.
private let contractRoutes: [(method: String, path: String)] = [
    ("get", "/healthz"),
    ("get", "/readyz"),
    ("get", "/metrics"),
    ("get", "/openapi.json"),
    ("post", "/v1/receipts"),
    ("get", "/v1/receipts/{verification_id}"),
    ("get", "/v1/users/{user_id}/entitlements"),
    ("get", "/v1/users/{user_id}/transactions"),
    ("post", "/v1/users/{user_id}/consumables/{currency}/consume"),
    ("post", "/v1/orders"),
    ("get", "/v1/orders/{order_id}"),
    ("post", "/v1/admin/users/{user_id}/grants"),
    ("delete", "/v1/admin/grants/{grant_id}"),
    ("put", "/v1/admin/products/{product_id}"),
    ("get", "/v1/admin/products"),
    ("get", "/v1/admin/audit"),
    ("get", "/v1/admin/reports/purchases"),
    ("post", "/v1/notifications/app-store"),
]

/// The one `/v1` route Apple calls: it carries no bearer key (it is checked by password or signature).
private let appleRoute = "/v1/notifications/app-store"

private let httpMethods: Set<String> = ["get", "put", "post", "delete", "options", "head", "patch", "trace"]

/// One operation of the document.
private struct Operation {
    var method: String
    var path: String
    var body: [String: Any]
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

    @Test func documentsExactlyTheRoutesOfTheContract() throws {
        let documented = Set(try operations(in: document()).map { "\($0.method.uppercased()) \($0.path)" })
        let contract = Set(contractRoutes.map { "\($0.method.uppercased()) \($0.path)" })
        #expect(contract.subtracting(documented).sorted() == [], "routes missing from the document")
        #expect(documented.subtracting(contract).sorted() == [], "routes not in the contract's table")
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
        #expect(keyed.count == contractRoutes.count - 5)
        for operation in keyed {
            let label = "\(operation.method) \(operation.path)"
            let security = operation.body["security"] as? [[String: Any]] ?? []
            #expect(security.count == 1 && security.first?["bearer"] != nil, "\(label) has no bearer security")
            let codes = statuses(of: operation)
            #expect(codes.isSuperset(of: ["400", "401"]), "\(label)")
            #expect(codes.contains("403") == operation.path.hasPrefix("/v1/admin/"), "\(label): 403 on admin routes only")
        }
    }

    @Test func theAppleRouteTakesNoBearerKeyButRefusesBadPasswordsWith401() throws {
        let operation = try #require(try operations(in: document()).first { $0.path == appleRoute })
        #expect((operation.body["security"] as? [Any])?.isEmpty == true)
        #expect(statuses(of: operation).contains("401"))
    }

    @Test func everyRouteWithABodyDocuments413AndOnlyThose() throws {
        for operation in try operations(in: document()) {
            let takesBody = operation.body["requestBody"] != nil
            #expect(statuses(of: operation).contains("413") == takesBody, "\(operation.method) \(operation.path)")
        }
    }

    @Test func publicRoutesNeedNoKey() throws {
        let open = try operations(in: document()).filter { !$0.path.hasPrefix("/v1/") }
        #expect(open.count == 4)
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
