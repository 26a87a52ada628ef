/// A complete HTTP response: any status, since the caller decides what a status means.
public struct HTTPClientResponse: Sendable {
    /// The HTTP status code of the final response (200, 404…); the client treats none as an error.
    public let status: Int
    /// Header fields of the final response head, in arrival order.
    public let headers: [(String, String)]
    /// The whole response body, at most the configuration's `maxResponseBytes` bytes.
    public let body: [UInt8]

    /// A response with these values; `headers` in arrival order.
    public init(status: Int, headers: [(String, String)], body: [UInt8]) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// The first value of the header `name`, compared case-insensitively.
    public func header(_ name: String) -> String? {
        let wanted = name.lowercased()
        return headers.first { $0.0.lowercased() == wanted }?.1
    }
}
