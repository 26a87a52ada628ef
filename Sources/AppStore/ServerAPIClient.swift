import EntitlementModel
import Foundation
import ServiceRuntime

/// Where the App Store Server API is and how long a call may take.
public struct ServerAPISettings: Sendable {
    /// The key and bundle id that mint each request's token.
    public var credentials: ServerAPICredentials
    /// `APPLE_API_URL_PRODUCTION` and `APPLE_API_URL_SANDBOX`: the base URLs the endpoints' paths follow.
    public var productionURL: String
    /// The Sandbox base URL (`APPLE_API_URL_SANDBOX`); ``sandboxDefault`` unless set.
    public var sandboxURL: String
    /// The longest single exchange (`APPLE_TIMEOUT_MS`); a call's remaining time shortens it.
    public var timeoutMs: Int
    /// How long a call may take when its caller names no time: waits and retries included.
    public var defaultWaitMs: Int
    /// The backoff between retries of answers Apple could not give, within a call's time.
    public var retry: RetrySchedule

    /// Apple's Production base URL, the default of `APPLE_API_URL_PRODUCTION`.
    public static let productionDefault = "https://api.storekit.apple.com"
    /// Apple's Sandbox base URL, the default of `APPLE_API_URL_SANDBOX`.
    public static let sandboxDefault = "https://api.storekit-sandbox.apple.com"

    /// Settings for Apple's own URLs, 10 s per exchange and per call, and retries backing off from 250 ms to 4 s,
    /// unless given.
    public init(credentials: ServerAPICredentials, productionURL: String = Self.productionDefault,
                sandboxURL: String = Self.sandboxDefault, timeoutMs: Int = 10_000, defaultWaitMs: Int = 10_000,
                retry: RetrySchedule = RetrySchedule(baseMs: 250, maxMs: 4_000)) {
        self.credentials = credentials
        self.productionURL = productionURL
        self.sandboxURL = sandboxURL
        self.timeoutMs = timeoutMs
        self.defaultWaitMs = defaultWaitMs
        self.retry = retry
    }

    /// The base URL of `environment`, without a trailing slash.
    func baseURL(_ environment: StoreEnvironment) -> String {
        let url = environment == .production ? productionURL : sandboxURL
        return url.hasSuffix("/") ? String(url.dropLast()) : url
    }
}

/// The App Store Server API client: carries out the model's `ServerAPIFlow` over the runtime's libcurl client
/// on the loop, one fresh ES256 token per request, and verifies every signed field of every answer
/// (`ServerAPISignatureChecking`) before decoding it with the model's decoders.
///
/// Make one per process: it holds the process's `RequestBudget`, which spaces the requests of each endpoint
/// and environment below Apple's limits and holds every request after a 429 until Apple's `Retry-After`.
/// A call waits for the budget, for Apple's rate limit and between retries (with backoff) only while its
/// time (`waitMs`) lasts; past that it finishes as `retryLater` or `rateLimited` with the time to try again.
/// Every exchange is logged with its endpoint, environment, HTTP status and Apple's `errorCode`; never the
/// token or the key.
@Loop
public final class ServerAPIClient {
    /// Where Apple is, the credentials and the time limits; fixed for the client's life.
    public let settings: ServerAPISettings
    private let http: HTTPClient
    let verifier: any ServerAPISignatureChecking
    private var budget = RequestBudget(allowances: ServerAPIEndpoint.allowances,
                                       defaultAllowance: .init(ratePerSecond: 1, burst: 1))
    /// Set once a configuration error is logged; a later success clears it, so each episode is logged once.
    private var configurationErrorLogged = false

    /// A client that sends through `http` and checks every signed field with `verifier` (a `SignedDataVerifier`,
    /// or a test's stand-in).
    public init(http: HTTPClient, settings: ServerAPISettings, verifier: some ServerAPISignatureChecking) {
        self.http = http
        self.settings = settings
        self.verifier = verifier
    }

    /// One request: its method, its path after the base URL (query included) and, for a POST, its body.
    struct Request {
        var path: String
        var body: [UInt8]?
    }

    /// Why an answer cannot be used (a signed field that does not verify, a body that does not decode).
    struct ReadFailure: Error {
        var detail: String
    }

    /// The time a call of `waitMs` (the settings' default when nil) may take, from now.
    func deadline(waitMs: Int?) -> Date {
        Date().addingTimeInterval(Double(max(0, waitMs ?? settings.defaultWaitMs)) / 1_000)
    }

    /// Runs one call of `endpoint`: the flow from `first` (on to Sandbox when `fallsBack`), `request` for each
    /// environment asked, and `read` on a 200 body, which returns nil for an answer that means "not found"
    /// (an invalid order) and throws when the answer cannot be used.
    func run<Answer: Sendable & Hashable>(
        _ endpoint: ServerAPIEndpoint, first: StoreEnvironment, fallsBack: Bool = true, deadline: Date,
        request: (StoreEnvironment) -> Request,
        read: (Data, StoreEnvironment) async throws(ReadFailure) -> Answer?
    ) async -> ServerAPIResult<Answer> {
        var flow = ServerAPIFlow(firstEnvironment: first, fallsBackToSandbox: fallsBack)
        var action = flow.start()
        var answer: Answer?
        var retries = 0
        while true {
            switch action {
            case .send(let environment):
                // No time left to wait (`wait_ms=0`, or spent on earlier calls): Apple is not asked.
                guard Date() < deadline else {
                    return .retryLater(until: nil, detail: "no time was left to wait for Apple", appleStatus: flow.appleStatus)
                }
                if let blocked: ServerAPIResult<Answer> = await admit(endpoint.budgetKey(in: environment), deadline: deadline,
                                                                      appleStatus: flow.appleStatus) {
                    return blocked
                }
                let (status, body) = await exchange(endpoint, environment, request(environment), deadline: deadline)
                var classified = status
                if status == .ok {
                    do {
                        answer = try await read(Data(body), environment)
                    } catch {
                        Log.error("apple_api_answer_unusable", ["endpoint": endpoint.rawValue, "environment": environment.rawValue, "error": error.detail])
                        return .unverified(detail: error.detail)
                    }
                    if answer == nil { classified = .notFound(errorCode: nil) }
                }
                if case .rateLimited(let until, _) = classified {
                    // A `Retry-After` already past still holds requests for a second, so that no loop forms.
                    let now = Date()
                    budget.rateLimited(until: until.map { max($0, now.addingTimeInterval(1)) }, now: now)
                }
                action = flow.received(classified)
            case .finish(let result):
                switch result {
                case .answered(let environment):
                    configurationErrorLogged = false
                    return .answered(answer!, environment: environment)
                case .notFound:
                    return .notFound
                case .configurationError(let refusal, let detail):
                    if !configurationErrorLogged {
                        configurationErrorLogged = true
                        Log.error("apple_api_configuration_error", ["endpoint": endpoint.rawValue, "error": detail])
                    }
                    return .configurationError(refusal, detail: detail, appleStatus: flow.appleStatus)
                case .rejected(let errorCode, let detail):
                    return .rejected(errorCode: errorCode, detail: detail)
                case .rateLimited:
                    // The budget holds every request until Apple's time (or a minute when it named none).
                    let until = budget.blockedUntil ?? Date()
                    guard until < deadline else { return .rateLimited(until: until, appleStatus: flow.appleStatus) }
                    action = flow.resend()
                case .retryLater(let detail):
                    guard !Task.isCancelled else {
                        return .retryLater(until: nil, detail: detail + "; the call was cancelled", appleStatus: flow.appleStatus)
                    }
                    retries += 1
                    let resume = Date().addingTimeInterval(Double(settings.retry.randomDelayMs(attempt: retries)) / 1_000)
                    guard resume < deadline else { return .retryLater(until: resume, detail: detail, appleStatus: flow.appleStatus) }
                    await LoopTimer.sleep(milliseconds: Self.milliseconds(until: resume))
                    action = flow.resend()
                }
            }
        }
    }

    /// Waits until the budget lets a request of `key` go out, or returns why it may not within `deadline`,
    /// with `appleStatus`, Apple's last error answer in the call (nil when it gave none: the request waited
    /// for the budget or another call's 429 before Apple was asked).
    private func admit<Answer>(_ key: String, deadline: Date, appleStatus: Int?) async -> ServerAPIResult<Answer>? {
        while let next = budget.admit(key, now: Date()) {
            guard next < deadline else {
                if let blocked = budget.blockedUntil, blocked >= next { return .rateLimited(until: blocked, appleStatus: appleStatus) }
                return .retryLater(until: next, detail: "the request budget of \(key) is spent until then", appleStatus: appleStatus)
            }
            await LoopTimer.sleep(milliseconds: Self.milliseconds(until: next))
        }
        return nil
    }

    /// One request to `environment`, classified; the body is kept for a 200.
    private func exchange(
        _ endpoint: ServerAPIEndpoint, _ environment: StoreEnvironment, _ request: Request, deadline: Date
    ) async -> (ServerAPIStatus, [UInt8]) {
        let url = settings.baseURL(environment) + request.path
        var headers = [("Authorization", "Bearer " + settings.credentials.token()), ("Accept", "application/json")]
        let timeoutMs = Int(max(1, min(Double(settings.timeoutMs), deadline.timeIntervalSinceNow * 1_000)))
        let started = EventLoop.shared.now
        do {
            let response: HTTPClientResponse
            if let body = request.body {
                headers.append(("Content-Type", "application/json"))
                response = try await http.post(url: url, body: body, headers: headers, totalTimeoutMs: timeoutMs)
            } else {
                response = try await http.get(url: url, headers: headers, totalTimeoutMs: timeoutMs)
            }
            let errorCode = response.status == 200 ? nil : ServerAPIResponse.ErrorBody.errorCode(in: Data(response.body))
            Log.info("apple_api", [
                "endpoint": endpoint.rawValue, "environment": environment.rawValue, "http_status": response.status,
                "error_code": errorCode, "duration_ms": EventLoop.shared.now &- started,
            ])
            let status = ServerAPIStatus(httpStatus: response.status, errorCode: errorCode, retryAfter: response.header("Retry-After"), now: Date())
            return (status, response.status == 200 ? response.body : [])
        } catch {
            let failure: ServerAPITransportFailure = error.kind == .timeout ? .timeout : .connectionError(error.description)
            Log.warning("apple_api_failed", [
                "endpoint": endpoint.rawValue, "environment": environment.rawValue, "failure": failure.description,
                "duration_ms": EventLoop.shared.now &- started,
            ])
            return (ServerAPIStatus(failure), [])
        }
    }

    private static func milliseconds(until date: Date) -> UInt64 {
        UInt64(max(1, (date.timeIntervalSinceNow * 1_000).rounded(.up)))
    }
}
