import CCurl

/// One HTTP exchange: a configured easy handle, the response being collected, and the continuation of the
/// task awaiting it.
///
/// libcurl reaches the transfer through pointers it holds for the easy handle: `CURLOPT_PRIVATE` (read back
/// when the multi handle reports the transfer done) and the write and header callbacks' data pointers. They
/// borrow the object; the multi handle's table of running transfers owns it while the easy handle is added.
@Loop
final class CurlTransfer {
    /// What a finished transfer hands to the awaiting task.
    typealias Outcome = Result<HTTPClientResponse, HTTPClientError>

    /// The request-specific part of the easy handle's setup.
    struct Request {
        enum Method { case get, post(body: [UInt8]) }
        var method: Method
        var url: String
        var headers: [(String, String)]
        var connectTimeoutMs: Int
        var totalTimeoutMs: Int
    }

    let easy: UnsafeMutableRawPointer
    private var headerList: UnsafeMutablePointer<curl_slist>?
    private let errorBuffer: UnsafeMutablePointer<CChar>
    private var response: ResponseAccumulator
    private var continuation: CheckedContinuation<Outcome, Never>?

    /// Creates and configures the easy handle; throws `.other` when the request cannot be expressed.
    init(_ request: Request, configuration: HTTPClientConfiguration, share: UnsafeMutableRawPointer) throws(HTTPClientError) {
        guard let easy = curl_easy_init() else {
            throw HTTPClientError(kind: .other, curlCode: Int(CURLE_OUT_OF_MEMORY.rawValue), message: "curl_easy_init failed")
        }
        self.easy = easy
        errorBuffer = .allocate(capacity: Int(CURL_ERROR_SIZE))
        errorBuffer.initialize(to: 0)
        response = ResponseAccumulator(bodyLimit: configuration.maxResponseBytes, truncates: configuration.truncatesLongBodies)
        try configure(request, configuration: configuration, share: share)
    }

    isolated deinit {
        curl_easy_cleanup(easy)
        curl_slist_free_all(headerList)
        errorBuffer.deallocate()
    }

    /// Remembers who awaits the outcome; called once, right before the easy handle joins the multi handle.
    func attach(_ continuation: CheckedContinuation<Outcome, Never>) {
        self.continuation = continuation
    }

    /// Hands `outcome` to the awaiting task; later calls do nothing.
    func resume(_ outcome: Outcome) {
        continuation?.resume(returning: outcome)
        continuation = nil
    }

    /// The outcome of a transfer libcurl reported done with `code`.
    func outcome(_ code: CURLcode) -> Outcome {
        guard code == CURLE_OK else {
            let detail = errorBuffer.pointee != 0 ? String(cString: errorBuffer) : String(cString: curl_easy_strerror(code))
            let kind = HTTPClientError.kind(curlCode: code, bodyLimitExceeded: response.bodyLimitExceeded)
            return .failure(HTTPClientError(kind: kind, curlCode: Int(code.rawValue), message: detail))
        }
        var status = 0
        ccurl_easy_getinfo_long(easy, CURLINFO_RESPONSE_CODE, &status)
        return .success(HTTPClientResponse(status: status, headers: response.headers, body: response.body))
    }

    private func configure(_ request: Request, configuration: HTTPClientConfiguration, share: UnsafeMutableRawPointer) throws(HTTPClientError) {
        var options = OptionSetter(easy: easy)
        let this = Unmanaged.passUnretained(self).toOpaque()
        options.string(CURLOPT_URL, request.url)
        options.string(CURLOPT_PROTOCOLS_STR, "http,https")
        options.long(CURLOPT_HTTP_VERSION, CURL_HTTP_VERSION_1_1)
        options.long(CURLOPT_NOSIGNAL, 1)
        options.long(CURLOPT_CONNECTTIMEOUT_MS, request.connectTimeoutMs)
        options.long(CURLOPT_TIMEOUT_MS, request.totalTimeoutMs)
        options.long(CURLOPT_TCP_KEEPALIVE, 1)
        options.long(CURLOPT_TCP_KEEPIDLE, 60)
        options.long(CURLOPT_TCP_KEEPINTVL, 30)
        options.long(CURLOPT_SSL_VERIFYPEER, 1)
        options.long(CURLOPT_SSL_VERIFYHOST, 2)
        options.string(CURLOPT_CAINFO, configuration.caBundlePath)
        options.string(CURLOPT_CAPATH, nil)
        options.long(CURLOPT_CA_CACHE_TIMEOUT, Self.caCacheSeconds)
        if !configuration.truncatesLongBodies { options.offset(CURLOPT_MAXFILESIZE_LARGE, configuration.maxResponseBytes) }
        options.share(share)
        options.pointer(CURLOPT_PRIVATE, this)
        options.pointer(CURLOPT_ERRORBUFFER, UnsafeMutableRawPointer(errorBuffer))
        options.dataCallback(CURLOPT_WRITEFUNCTION, Self.onBody)
        options.pointer(CURLOPT_WRITEDATA, this)
        options.dataCallback(CURLOPT_HEADERFUNCTION, Self.onHeader)
        options.pointer(CURLOPT_HEADERDATA, this)
        switch request.method {
        case .get:
            options.long(CURLOPT_HTTPGET, 1)
        case .post(let body):
            options.long(CURLOPT_POST, 1)
            options.offset(CURLOPT_POSTFIELDSIZE_LARGE, body.count)
            // libcurl copies the size set above from a non-null pointer, so an empty body lends one dummy byte.
            (body.isEmpty ? [0] : body).withUnsafeBytes { bytes in
                options.pointer(CURLOPT_COPYPOSTFIELDS, UnsafeMutableRawPointer(mutating: bytes.baseAddress!))
            }
        }
        // "Expect:" with no value stops libcurl from waiting for `100 Continue` before sending a larger body.
        for line in request.headers.map({ "\($0.0): \($0.1)" }) + ["Expect:"] {
            guard !line.utf8.contains(where: { $0 == UInt8(ascii: "\r") || $0 == UInt8(ascii: "\n") }) else {
                throw HTTPClientError(kind: .other, curlCode: 0, message: "header \(line.prefix { $0 != ":" }) holds a line break")
            }
            guard let list = curl_slist_append(headerList, line) else {
                throw HTTPClientError(kind: .other, curlCode: Int(CURLE_OUT_OF_MEMORY.rawValue), message: "curl_slist_append failed")
            }
            headerList = list
        }
        options.slist(CURLOPT_HTTPHEADER, headerList)
        if let failure = options.failure {
            throw HTTPClientError(kind: .other, curlCode: Int(failure.code.rawValue),
                                  message: "\(failure.option): \(String(cString: curl_easy_strerror(failure.code)))")
        }
    }

    // MARK: - C callbacks
    //
    // Outside the actor's isolation, so libcurl's calls cost no executor query (`Loop.assumeIsolated` checks).

    /// `CURLOPT_WRITEFUNCTION`: a piece of the body; returning less than its length makes libcurl fail the
    /// transfer (the body limit).
    nonisolated private static let onBody: ccurl_data_callback = { data, size, count, userdata in
        guard let userdata else { return 0 }
        let transfer = Unmanaged<CurlTransfer>.fromOpaque(userdata).takeUnretainedValue()
        let length = size * count
        nonisolated(unsafe) let bytes = UnsafeRawBufferPointer(start: data, count: length)
        return Loop.assumeIsolated { transfer.response.receiveBody(bytes) ? length : 0 }
    }

    /// `CURLOPT_HEADERFUNCTION`: one header line (status line and final blank line included).
    nonisolated private static let onHeader: ccurl_data_callback = { data, size, count, userdata in
        guard let userdata else { return 0 }
        let transfer = Unmanaged<CurlTransfer>.fromOpaque(userdata).takeUnretainedValue()
        let length = size * count
        nonisolated(unsafe) let bytes = UnsafeRawBufferPointer(start: data, count: length)
        Loop.assumeIsolated { transfer.response.receiveHeaderLine(bytes) }
        return length
    }

    /// How long libcurl keeps the parsed CA store for reuse by later connections: a day.
    private static let caCacheSeconds = 86_400
}

/// Applies easy-handle options through the typed shims, remembering the first one libcurl rejects.
private struct OptionSetter {
    let easy: UnsafeMutableRawPointer
    private(set) var failure: (option: UInt32, code: CURLcode)?

    init(easy: UnsafeMutableRawPointer) {
        self.easy = easy
    }

    mutating func long(_ option: CURLoption, _ value: Int) { check(option, ccurl_easy_setopt_long(easy, option, value)) }
    mutating func offset(_ option: CURLoption, _ value: Int) { check(option, ccurl_easy_setopt_off_t(easy, option, curl_off_t(value))) }
    mutating func string(_ option: CURLoption, _ value: String?) { check(option, ccurl_easy_setopt_string(easy, option, value)) }
    mutating func pointer(_ option: CURLoption, _ value: UnsafeMutableRawPointer) { check(option, ccurl_easy_setopt_pointer(easy, option, value)) }
    mutating func slist(_ option: CURLoption, _ value: UnsafeMutablePointer<curl_slist>?) { check(option, ccurl_easy_setopt_slist(easy, option, value)) }
    mutating func share(_ value: UnsafeMutableRawPointer) { check(CURLOPT_SHARE, ccurl_easy_setopt_share(easy, value)) }
    mutating func dataCallback(_ option: CURLoption, _ value: ccurl_data_callback) { check(option, ccurl_easy_setopt_data_callback(easy, option, value)) }

    private mutating func check(_ option: CURLoption, _ code: CURLcode) {
        if code != CURLE_OK && failure == nil { failure = (option.rawValue, code) }
    }
}
