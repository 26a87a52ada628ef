import Timestamps
import Foundation

/// One complete request as handlers see it: the head and the whole body. What the server learnt about it
/// (route, path parameters, caller) travels beside it in an `HTTPRequestContext`.
///
/// The fields (`request.method`, `request.body`, …; see `Fields`) live in one box shared by copies and
/// copied on write: a request passes through the connection's machine, the router and the handler, and
/// each copy costs one reference count instead of one per field.
@dynamicMemberLookup
public struct HTTPRequest: Sendable, Equatable {
    /// The request's stored fields, read and set through the request (`request.body`); copies share them until one writes.
    public struct Fields: Sendable, Equatable {
        /// The method as sent, e.g. `GET`.
        public var method: String
        /// The raw (still percent-encoded) path, without the query.
        public var path: String
        /// The query's names and values, percent-decoded (`+` is not a space); the last of repeated names wins.
        public var query: [String: String]
        /// The query exactly as sent, without the `?`; empty when there was none.
        public var rawQuery: String
        /// The query's first problem (a name given twice, a malformed escape); nil when it has none.
        public var queryProblem: HTTPQueryProblem?
        /// The header fields as received, in order; names compare case-insensitively.
        public var headers: HTTPHeaders
        /// The whole body, de-chunked, at most `maxBodyBytes`; empty when none was sent.
        public var body: [UInt8]
        /// The client's `X-Request-Id` when it was sane (1–128 visible ASCII characters), else a generated one.
        /// Every response and log line about this request carries it.
        public var requestID: String
    }

    /// Mutated only while uniquely referenced (see `subscript(dynamicMember:)`), like the standard library's buffers.
    private final class Box: @unchecked Sendable {
        var fields: Fields
        init(_ fields: Fields) { self.fields = fields }
    }

    private var box: Box

    /// Reads or writes one field; a write first copies the shared box unless this request holds the only reference.
    public subscript<Value>(dynamicMember field: WritableKeyPath<Fields, Value>) -> Value {
        get { box.fields[keyPath: field] }
        set {
            if !isKnownUniquelyReferenced(&box) { box = Box(box.fields) }
            box.fields[keyPath: field] = newValue
        }
    }

    /// A request with these fields, nothing validated or derived (`query` is not parsed from `rawQuery`).
    public init(
        method: String, path: String, query: [String: String] = [:], rawQuery: String = "", queryProblem: HTTPQueryProblem? = nil,
        headers: HTTPHeaders = HTTPHeaders(), body: [UInt8] = [], requestID: String
    ) {
        box = Box(Fields(
            method: method, path: path, query: query, rawQuery: rawQuery, queryProblem: queryProblem, headers: headers,
            body: body, requestID: requestID))
    }

    public static func == (a: HTTPRequest, b: HTTPRequest) -> Bool {
        a.box === b.box || a.box.fields == b.box.fields
    }

    /// The request of `head` with `body`: the head's own box when there is no body.
    init(head: HTTPRequestHead, body: [UInt8]) {
        self = head.request
        if !body.isEmpty { self.body = body }
    }

    /// The body decoded as JSON.
    ///
    /// Throws a 415 `ProblemError` when the body comes with a `Content-Encoding` (none is decoded), and a 400 one
    /// when it is empty, not UTF-8, not JSON (a trailing comma included), gives a name twice in one object, or does
    /// not fit `T`; the detail and the `field` member name the offending field (`items[0].product_id`) when there is
    /// one.
    /// Dates are RFC 3339 strings, with or without fractional seconds.
    public func decodeJSON<T: Decodable>(_ type: T.Type = T.self) throws -> T {
        let body = box.fields.body
        if let coding = box.fields.headers["Content-Encoding"], coding.lowercased() != "identity" {
            throw ProblemError(status: 415, detail: "The request body is encoded (Content-Encoding); send it unencoded.",
                               extra: ["field": .string("Content-Encoding")])
        }
        guard !body.isEmpty else { throw ProblemError.badRequest("The request body is empty; a JSON document is expected.") }
        guard String(validating: body, as: UTF8.self) != nil else {
            throw ProblemError.badRequest("The request body is not valid UTF-8.")
        }
        try refuseLenientJSON()
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .rfc3339
        do {
            return try decoder.decode(T.self, from: Data(body))
        } catch let error as DecodingError {
            throw Self.problem(for: error)
        }
    }

    /// Throws the 400 ``decodeJSON(_:)`` gives for what Foundation's parsers accept in a body and JSON does not, or
    /// other parsers read otherwise: a name given twice in one object (naming it), a comma before `}` or `]`. For a
    /// route that parses its body by other means.
    public func refuseLenientJSON() throws {
        switch JSONLeniency.first(in: box.fields.body) {
        case .repeatedName(let field): throw ProblemError.badRequest("The field '\(field)' is given more than once.", field: field)
        case .trailingComma: throw ProblemError.badRequest("The request body is not valid JSON: a comma comes before '}' or ']'.")
        case nil: break
        }
    }

    /// Turns a decoding failure into a 400 problem that names the field, never echoing the body.
    static func problem(for error: DecodingError) -> ProblemError {
        switch error {
        case .keyNotFound(let key, let context):
            let field = fieldPath(context.codingPath + [key])
            return .badRequest("The field '\(field)' is missing.", field: field)
        case .valueNotFound(let type, let context):
            let field = fieldPath(context.codingPath)
            guard !field.isEmpty else { return .badRequest("The request body must be a JSON \(typeName(type)).") }
            return .badRequest("The field '\(field)' must not be null.", field: field)
        case .typeMismatch(let type, let context):
            let field = fieldPath(context.codingPath)
            guard !field.isEmpty else { return .badRequest("The request body must be a JSON \(typeName(type)).") }
            return .badRequest("The field '\(field)' must be \(article(typeName(type))).", field: field)
        case .dataCorrupted(let context):
            let field = fieldPath(context.codingPath)
            guard !field.isEmpty else { return .badRequest("The request body is not valid JSON.") }
            return .badRequest("The field '\(field)' is invalid: \(context.debugDescription)", field: field)
        @unknown default:
            return .badRequest("The request body does not match the expected JSON.")
        }
    }

    /// `items[0].product_id` style rendering of a coding path.
    static func fieldPath(_ path: [CodingKey]) -> String {
        var out = ""
        for key in path {
            if let index = key.intValue {
                out += "[\(index)]"
            } else {
                if !out.isEmpty { out += "." }
                out += key.stringValue
            }
        }
        return out
    }

    private static func typeName(_ type: Any.Type) -> String {
        switch type {
        case is String.Type: "string"
        case is Bool.Type: "boolean"
        case is Int.Type, is Int64.Type, is Int32.Type, is UInt.Type, is UInt64.Type: "integer"
        case is Double.Type, is Float.Type, is Decimal.Type: "number"
        case is [Any].Type: "array"
        case is [String: Any].Type: "object"
        default: type is any Collection.Type ? "array" : "object"
        }
    }

    private static func article(_ noun: String) -> String {
        (["a", "e", "i", "o", "u"].contains(noun.first.map(String.init) ?? "") ? "an " : "a ") + noun
    }
}
