/// The values of a route's `{name}` segments, percent-decoded, read as the types that validate them:
/// `try context.parameters.require("user_id", as: UserID.self)`.
public struct HTTPPathParameters: Sendable, Equatable {
    /// The first parameter, held inline: most routes have one, and it then costs no allocation.
    private var first: (name: String, value: String)?
    /// The others, in pattern order; a route has few, so a scan beats hashing.
    private var rest: [(name: String, value: String)] = []

    init() {}

    /// Adds the next parameter of the pattern.
    mutating func append(_ name: String, _ value: String) {
        if first == nil { first = (name, value) } else { rest.append((name, value)) }
    }

    /// The decoded text of parameter `name`, or nil when the route has no such parameter.
    public subscript(name: String) -> String? {
        if let first, first.name == name { return first.value }
        return rest.first { $0.name == name }?.value
    }

    /// Parameter `name` as a `Value`. A value the type refuses is a 400 problem naming the parameter
    /// (`field`) and saying what it must be; a name the route's pattern lacks is a programming error,
    /// answered 500 and logged.
    public func require<Value: PathParameterValue>(_ name: String, as type: Value.Type = Value.self) throws -> Value {
        guard let text = self[name] else { throw UnknownParameter(name: name) }
        return try Value(validating: text, field: name)
    }

    public static func == (a: HTTPPathParameters, b: HTTPPathParameters) -> Bool {
        a.first?.name == b.first?.name && a.first?.value == b.first?.value
            && a.rest.elementsEqual(b.rest) { $0.name == $1.name && $0.value == $1.value }
    }

    /// A handler asked for a parameter its route's pattern does not have.
    struct UnknownParameter: Error, CustomStringConvertible {
        var name: String
        var description: String { "the route has no path parameter '\(name)'" }
    }
}

/// A type a path segment can be read as: it decides which texts are valid values and says what it expects.
public protocol PathParameterValue {
    /// The value the decoded segment `text` stands for, or nil when it is not a valid one.
    init?(pathParameter text: String)
    /// What a valid value is, completing the sentence "'name' …" of the 400 problem: `must be a UUID`.
    static var pathParameterRequirement: String { get }
}

extension PathParameterValue {
    /// `text` as this type, or a 400 problem naming `field`: the same rule for the same value wherever it is
    /// given (a path segment, a query or body field).
    public init(validating text: String, field: String) throws(ProblemError) {
        guard let value = Self(pathParameter: text) else {
            throw ProblemError.badRequest("'\(field)' \(Self.pathParameterRequirement).", field: field)
        }
        self = value
    }
}

/// Any segment, as it was decoded.
extension String: PathParameterValue {
    /// The decoded text as is; never nil (a path segment that matches is never empty).
    public init?(pathParameter text: String) { self = text }
    /// The requirement a string states; `init?(pathParameter:)` itself accepts any text.
    public static var pathParameterRequirement: String { "must not be empty" }
}
