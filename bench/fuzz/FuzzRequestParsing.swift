import Foundation

/// libFuzzer entry over the request-parsing path: bytes → `HTTPParserEvent`s → `HTTPRequest` (or the
/// problem a failure answers), the body decoded as JSON and the path's segments percent-decoded, as the
/// server and the router do.
///
/// The input is parsed twice: in one piece, and in pieces of 1–16 bytes (the size taken from its first byte)
/// fed the way a connection feeds arriving bytes, keeping what one call did not consume for the next. Both
/// must find the same requests and the same failure; any difference, crash or sanitizer report is a finding.
/// As on a connection, nothing after a request that closes it is parsed.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzRequestParsing(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let input = Array(UnsafeBufferPointer(start: data, count: size))
    let whole = FuzzDriver.parse(input, pieceSize: max(1, input.count))
    let pieceSize = Int(input.first ?? 0) % 16 + 1
    let pieces = FuzzDriver.parse(input, pieceSize: pieceSize)
    if !whole.matches(pieces) {
        fatalError("parsing in \(pieceSize)-byte pieces differs:\nwhole:  \(whole)\npieces: \(pieces)")
    }
    return 0
}

/// One parse of a byte stream, reduced to what must not depend on how the bytes arrived.
enum FuzzDriver {
    static let limits = HTTPParserLimits(maxHeaderBytes: 8_192, maxHeaders: 64)
    static let maxBodyBytes = 1 << 20

    /// What the parser found: complete requests (head without its random request id, whole body) and
    /// how it failed, if it did.
    struct Outcome: Equatable, CustomStringConvertible {
        var requests: [ParsedRequest] = []
        var failure: String?
        /// True when this is a header or URI limit rather than a syntax error.
        var limitFailure = false
        var description: String { "requests=\(requests) failure=\(failure ?? "none")" }

        /// The same requests and the same failure, except that a limit failure in one run may be a syntax
        /// failure in the other: limits are checked as http-parser hands over pieces of a token, and a piece
        /// boundary can put the byte that breaks a limit before the byte that breaks the syntax.
        func matches(_ other: Outcome) -> Bool {
            guard requests == other.requests else { return false }
            if failure == other.failure { return true }
            return failure != nil && other.failure != nil && (limitFailure || other.limitFailure)
        }
    }

    static func parse(_ input: [UInt8], pieceSize: Int) -> Outcome {
        let parser = HTTPRequestParser(limits: limits)
        var outcome = Outcome()
        var head: HTTPRequestHead?
        var body: [UInt8] = []
        var pending: [UInt8] = []
        var offset = 0
        while offset < input.count && outcome.failure == nil {
            let end = min(input.count, offset + pieceSize)
            pending += input[offset..<end]
            offset = end
            // Like a connection: parse what is buffered until the parser needs more bytes.
            while !pending.isEmpty && outcome.failure == nil {
                let (consumed, events) = pending.withUnsafeBytes { parser.parse($0) }
                var ended = false
                for event in events {
                    switch event {
                    case .messageBegin:
                        head = nil
                        body = []
                    case .head(let parsed):
                        head = parsed
                    case .body(let bytes):
                        if body.count + bytes.count <= maxBodyBytes { body += bytes }
                    case .end:
                        ended = true
                        if let head {
                            outcome.requests.append(describe(head, body))
                            // The connection ends after a request that may not keep it open (an upgrade
                            // attempt included), as the server's does: later bytes are never parsed.
                            if !head.keepAlive { return outcome }
                        }
                    case .failure(let failure, _, _):
                        switch failure {
                        case .uriTooLong, .headersTooLarge, .tooManyHeaders: outcome.limitFailure = true
                        case .conflictingFraming, .malformed: break
                        }
                        // The method label is left out: it is known only once http-parser has delivered part of
                        // the URL, which depends on where the bytes were cut.
                        outcome.failure = "\(failure) problem=\(failure.problem.jsonText)"
                    }
                }
                pending.removeFirst(min(consumed, pending.count))
                if consumed == 0 || !ended { break }
            }
        }
        return outcome
    }

    /// A complete request as a handler would see it, with what handlers derive from it.
    struct ParsedRequest: Equatable, CustomStringConvertible {
        var head: HTTPRequestHead
        var body: [UInt8]
        var segments: [String?]
        var json: String
        var description: String { "\(head) body=\(body) segments=\(segments) json=\(json)" }
    }

    /// The request as a handler would see it (its random request id left out), everything handlers derive
    /// from it exercised: the JSON body (or its problem) and the percent-decoded path segments.
    static func describe(_ head: HTTPRequestHead, _ body: [UInt8]) -> ParsedRequest {
        var normalized = head
        normalized.requestID = ""
        let request = HTTPRequest(head: normalized, body: body)
        let segments = request.path.split(separator: "/", omittingEmptySubsequences: false).map { PercentDecoding.decode($0) }
        let json: String
        do {
            json = try request.decodeJSON(JSONValue.self).jsonText
        } catch let problem as ProblemError {
            // Which bad field a problem names may vary between runs (JSON objects decode through hashed
            // dictionaries), so only its status is compared.
            _ = problem.jsonText
            json = "problem \(problem.status)"
        } catch {
            json = "error \(error)"
        }
        _ = ProblemError(status: 400, detail: json).response
        return ParsedRequest(head: normalized, body: body, segments: segments, json: json)
    }
}
