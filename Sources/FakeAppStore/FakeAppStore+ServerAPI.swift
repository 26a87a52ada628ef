import Crypto
import EntitlementModel
import Foundation
import ServiceRuntime

/// The fake App Store Server API: Apple's endpoints at Apple's paths, Production at the server's root and
/// Sandbox under `/sandbox` (so `APPLE_API_URL_PRODUCTION=http://host:port`,
/// `APPLE_API_URL_SANDBOX=http://host:port/sandbox`), answering from the same purchase store as the rest of
/// the fake, signed by its chain:
///
/// - `GET /inApps/v1/transactions/{transactionId}`, `GET /inApps/v2/history/{transactionId}?revision=`
///   (20 per page, oldest first), `GET /inApps/v1/subscriptions/{transactionId}?status=`, `GET
///   /inApps/v1/lookup/{orderId}`, `POST /inApps/v1/notifications/history?paginationToken=` (`{"startDate",
///   "endDate", "notificationType"?, "notificationSubtype"?, "transactionId"?, "onlyFailures"?}`, 20 per page,
///   from the notifications the fake sent, by their first attempt). A purchase is known only in its own
///   environment (a Sandbox purchase is `4040010` in Production, an order `status` 1); history and statuses
///   are the purchasing customer's (the purchase's `customer`).
/// - Every request needs `Authorization: Bearer <JWT>` signed (ES256) by the fake's key, with `kid` and `iss`
///   the fake's (`FAKE_APPLE_API_KEY_ID`, `FAKE_APPLE_ISSUER_ID`), `aud` `appstoreconnect-v1`, `bid` the
///   fake's bundle id, `exp` in the future and at most 60 minutes after `iat` (or now: Apple's own library
///   sends no `iat`), `iat` not in the future; otherwise 401 `Unauthenticated`, as Apple answers.
///
/// The control API:
/// - `GET /control/server-api`: `{"key_id", "issuer_id", "bundle_id", "private_key" (the `.p8` PEM),
///   "public_key" (PEM), "production_path": "", "sandbox_path": "/sandbox"}`. The key is fresh per start, or
///   kept in `FAKE_APPLE_API_KEY_FILE` (created there when missing).
/// - `PUT /control/server-api/config` `{"latency_ms", "outage", "rate_limit_per_second": N|null,
///   "fault_rate": 0...1, "fault_error_code", "fault_seed", "fault_mix": [step, …]|null}` (members left out
///   keep their value); `GET` reads it. An outage answers 503; the rate limit answers 429 `4290000` beyond N
///   requests per second per endpoint and environment, `Retry-After` the next second in UNIX milliseconds; the
///   fault rate answers that share of requests with `fault_error_code` (default `5000001`, HTTP 500), or, with
///   a fault mix (steps as in scenarios: a code, a status, a delay past the client's timeout, a drop), with
///   one of its steps drawn at random (seeded).
/// - `POST /control/server-api/scenarios` `{"endpoint"?: "transaction_info"|"transaction_history"|
///   "subscription_statuses"|"order_lookup"|"notification_history", "environment"?: "Production"|"Sandbox",
///   "steps": [{"status"?, "error_code"?, "error_message"?, "retry_after_ms"?, "retry_after"?, "delay_ms"?,
///   "drop"?}]}`: the next matching requests take these steps in order (endpoint and environment first,
///   then endpoint, environment, any), then the store answers again. A step's HTTP status defaults to its
///   error code's (`4040010` → 404); a 429 carries `Retry-After` `retry_after_ms` (default 1000) after the
///   answer, as UNIX milliseconds; a step with neither status nor code answers from the store (after its
///   delay). A refused token is 401 before any step.
/// - `GET /control/server-api/requests`: `{"count", "counts": {"<endpoint>.<environment>": N}, "statuses":
///   {"<HTTP status>": N}, "faults", "dropped", "retry_after": {"early", "longest_honoured_ms", "in_flight_ms"}
///   (`FakeServerAPITally`: requests that came during a 429's hold, and the longest hold kept), "requests":
///   [{"endpoint", "environment", "path", "status", "refusal", "token": {"alg", "kid", "typ", "iss", "bid",
///   "aud", "iat", "exp"}}]}` (the newest 1000; the token's claims as read, never the token).
extension FakeAppStore {
    func addServerAPIRoutes(to router: Router) {
        for (prefix, environment) in [("", StoreEnvironment.production), ("/sandbox", .sandbox)] {
            for endpoint in ServerAPIEndpoint.allCases {
                if endpoint == .notificationHistory {
                    router.post(prefix + endpoint.pathPrefix) { [unowned self] request, context in try await serverAPI(request, context, endpoint, environment) }
                } else {
                    router.get(prefix + endpoint.pathPrefix + "{id}") { [unowned self] request, context in try await serverAPI(request, context, endpoint, environment) }
                }
            }
        }
        router.get("/control/server-api") { [unowned self] _, _ in
            .json([
                "key_id": .string(configuration.apiKeyID), "issuer_id": .string(configuration.apiIssuerID),
                "bundle_id": .string(storeKit.settings.bundleID),
                "private_key": .string(serverAPIKey.pemRepresentation + "\n"),
                "public_key": .string(serverAPIKey.publicKey.pemRepresentation + "\n"),
                "production_path": "", "sandbox_path": "/sandbox",
            ] as JSONValue)
        }
        router.get("/control/server-api/config") { [unowned self] _, _ in serverAPISettingsResponse() }
        router.put("/control/server-api/config") { [unowned self] request, context in try configureServerAPI(request) }
        router.post("/control/server-api/scenarios") { [unowned self] request, context in try addServerAPIScenario(request) }
        router.get("/control/server-api/requests") { [unowned self] _, _ in serverAPIRequestsResponse() }
    }

    // MARK: - The endpoints

    private func serverAPI(_ request: HTTPRequest, _ context: HTTPRequestContext, _ endpoint: ServerAPIEndpoint,
                           _ environment: StoreEnvironment) async throws(HTTPConnectionAbort) -> HTTPResponse {
        let (token, refusal) = authorize(request)
        let target = request.path + (request.rawQuery.isEmpty ? "" : "?" + request.rawQuery)
        let (decision, sequence) = serverAPI.decide(endpoint, environment, path: target, token: token, refusal: refusal, now: Self.nowMs())
        let delay: Int = switch decision {
        case .serve(let delay), .respond(_, _, _, let delay), .drop(let delay): delay
        }
        if delay > 0, await !hold(milliseconds: delay) { return Self.releasedResponse }
        var response: HTTPResponse
        switch decision {
        case .drop:
            throw HTTPConnectionAbort()
        case .respond(let status, let retryAfter, let body, _):
            response = switch body {
            case .error(let code, let message): .json(["errorCode": .int(code), "errorMessage": .string(message)] as JSONValue, status: status)
            case .text(let text): .text(text, status: status)
            }
            if let retryAfter { response.headers.set("Retry-After", retryAfter) }
        case .serve:
            // Rendered after the wait, so that the answer shows the store as it is when it goes out.
            response = answer(request, id: context.parameters["id"] ?? "", endpoint, environment, now: Self.nowMs())
        }
        serverAPI.answered(sequence, status: response.status)
        return response
    }

    /// The token of `request` as read, and why it is refused (nil: accepted).
    private func authorize(_ request: HTTPRequest) -> (ServerAPIToken?, String?) {
        guard let header = request.headers["Authorization"], header.hasPrefix("Bearer ") else {
            return (nil, "no Authorization: Bearer token")
        }
        let token: ServerAPIToken, jws: CompactJWS
        do {
            jws = try CompactJWS(String(header.dropFirst("Bearer ".count)))
            token = try ServerAPIToken(jws)
        } catch {
            return (nil, String(describing: error))
        }
        guard let signature = try? P256.Signing.ECDSASignature(rawRepresentation: jws.signature),
              serverAPIKey.publicKey.isValidSignature(signature, for: jws.signingInput) else {
            return (token, "the signature does not verify with the fake's key")
        }
        let refusal = token.refusal(now: Date(), bundleID: storeKit.settings.bundleID,
                                    issuerID: configuration.apiIssuerID, keyID: configuration.apiKeyID)
        return (token, refusal)
    }

    /// The store's answer to an authorized request.
    private func answer(_ request: HTTPRequest, id: String, _ endpoint: ServerAPIEndpoint, _ environment: StoreEnvironment, now: Int64) -> HTTPResponse {
        if endpoint != .notificationHistory && endpoint != .orderLookup && (id.isEmpty || !id.utf8.allSatisfy { (48...57).contains($0) }) {
            return Self.apiError(4_000_006)
        }
        switch endpoint {
        case .transactionInfo:
            guard let transaction = storeKit.transaction(id, in: environment) else { return Self.apiError(4_040_010) }
            return .json(["signedTransactionInfo": .string(signed(transaction, now))] as JSONValue)
        case .transactionHistory:
            return history(id, environment, revision: request.query["revision"], now: now)
        case .subscriptionStatuses:
            return statuses(id, environment, filter: Self.queryValues("status", in: request.rawQuery).compactMap { Int($0) }, now: now)
        case .orderLookup:
            let transactions = storeKit.order(id, in: environment)
            guard !transactions.isEmpty else { return .json(["status": 1] as JSONValue) }
            return .json(["status": 0, "signedTransactions": .array(transactions.map { .string(signed($0, now)) })] as JSONValue)
        case .notificationHistory:
            return notificationHistory(request, environment, now: now)
        }
    }

    private func signed(_ transaction: FakeStoreKitTransaction, _ now: Int64) -> String {
        signingChain.sign(FakeStoreKit.payload(transaction, signedDate: now))
    }

    /// Get Transaction History: 20 per page after `revision` (`<purchaseDate>_<transactionId>` of the last
    /// transaction of the previous page).
    private func history(_ id: String, _ environment: StoreEnvironment, revision: String?, now: Int64) -> HTTPResponse {
        guard let all = storeKit.customerTransactions(of: id, in: environment) else { return Self.apiError(4_040_010) }
        let revisionOf = { (transaction: FakeStoreKitTransaction) in "\(transaction.purchaseDate)_\(transaction.transactionID)" }
        var start = 0
        if let revision {
            guard let index = all.firstIndex(where: { revisionOf($0) == revision }) else { return Self.apiError(4_000_005) }
            start = index + 1
        }
        let page = all[start...].prefix(FakeNotificationLog.pageSize)
        return .json([
            "revision": .string(page.last.map(revisionOf) ?? revision ?? "0_0"),
            "hasMore": .bool(start + page.count < all.count),
            "bundleId": .string(storeKit.settings.bundleID), "appAppleId": .int(Int(storeKit.settings.appAppleID)),
            "environment": .string(environment.rawValue),
            "signedTransactions": .array(page.map { .string(signed($0, now)) }),
        ] as JSONValue)
    }

    /// Get All Subscription Statuses, keeping only the statuses in `filter` when it names any.
    private func statuses(_ id: String, _ environment: StoreEnvironment, filter: [Int], now: Int64) -> HTTPResponse {
        guard let groups = storeKit.customerSubscriptions(of: id, in: environment) else { return Self.apiError(4_040_010) }
        var data: [JSONValue] = []
        for (group, originals) in groups {
            var items: [JSONValue] = []
            for original in originals {
                guard let latest = storeKit.chain(original).last, let status = storeKit.status(of: original, now: now),
                      filter.isEmpty || filter.contains(status.rawValue) else { continue }
                var item: [String: JSONValue] = [
                    "status": .int(status.rawValue), "originalTransactionId": .string(original),
                    "signedTransactionInfo": .string(signed(latest, now)),
                ]
                item["signedRenewalInfo"] = storeKit.renewalPayload(original, signedDate: now).map { .string(signingChain.sign($0)) }
                items.append(.object(item))
            }
            if !items.isEmpty { data.append(["subscriptionGroupIdentifier": .string(group), "lastTransactions": .array(items)]) }
        }
        return .json([
            "environment": .string(environment.rawValue), "bundleId": .string(storeKit.settings.bundleID),
            "appAppleId": .int(Int(storeKit.settings.appAppleID)), "data": .array(data),
        ] as JSONValue)
    }

    /// Get Notification History: Apple's checks of the body, then 20 per page from the notification log.
    private func notificationHistory(_ request: HTTPRequest, _ environment: StoreEnvironment, now: Int64) -> HTTPResponse {
        let body = (try? JSONDecoder().decode(JSONValue.self, from: Data(request.body))) ?? .null
        guard case .object(let members) = body else { return Self.apiError(4_000_000) }
        func milliseconds(_ key: String) -> Int64? { if case .int(let value)? = members[key] { Int64(value) } else { nil } }
        func text(_ key: String) -> String? { if case .string(let value)? = members[key] { value } else { nil } }
        guard let start = milliseconds("startDate") else { return Self.apiError(4_000_015) }
        guard let end = milliseconds("endDate") else { return Self.apiError(4_000_016) }
        guard start < end else { return Self.apiError(4_000_013) }
        guard start >= now - 180 * 86_400_000 else { return Self.apiError(4_000_012) }
        var query = FakeNotificationLog.Query(startMs: start, endMs: end, type: text("notificationType"), subtype: text("notificationSubtype"))
        if let transactionID = text("transactionId") {
            query.originalTransactionID = storeKit.transactions[transactionID]?.originalTransactionID ?? "-"
        }
        if case .bool(let onlyFailures)? = members["onlyFailures"] { query.onlyFailures = onlyFailures }
        var offset = 0
        if let token = request.query["paginationToken"] {
            guard token.hasPrefix("page-"), let number = Int(token.dropFirst(5)), number >= 0 else { return Self.apiError(4_000_014) }
            offset = number
        }
        let (entries, next) = notificationLog.page(query, environment: environment, offset: offset)
        var answer: [String: JSONValue] = [
            "hasMore": .bool(next != nil),
            "notificationHistory": .array(entries.map { entry in
                [
                    "signedPayload": .string(entry.signedPayload),
                    "sendAttempts": .array(entry.attempts.map { ["attemptDate": .int(Int($0.dateMs)), "sendAttemptResult": .string($0.result)] }),
                ]
            }),
        ]
        answer["paginationToken"] = next.map { .string("page-\($0)") }
        return .json(JSONValue.object(answer))
    }

    /// Apple's error answer for `code`, with its HTTP status (`4040010` → 404).
    private static func apiError(_ code: Int) -> HTTPResponse {
        .json(["errorCode": .int(code), "errorMessage": .string(FakeServerAPIState.message(code))] as JSONValue, status: code / 10_000)
    }

    /// Every value of `name` in a raw query (`status=1&status=2`), percent-decoded.
    private static func queryValues(_ name: String, in rawQuery: String) -> [String] {
        rawQuery.split(separator: "&").compactMap { pair in
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard parts.count == 2, parts[0] == name else { return nil }
            return String(parts[1]).removingPercentEncoding
        }
    }

    // MARK: - Control

    private static let endpoints = Dictionary(uniqueKeysWithValues: ServerAPIEndpoint.allCases.map { ($0.rawValue, $0) })
    private static let stepKeys: Set<String> = ["status", "error_code", "error_message", "retry_after_ms", "retry_after", "delay_ms", "drop"]

    private func configureServerAPI(_ request: HTTPRequest) throws -> HTTPResponse {
        let body = try FakeControlBody(request, allowed: ["latency_ms", "outage", "rate_limit_per_second", "fault_rate", "fault_error_code", "fault_seed",
                                                          "fault_mix"])
        var settings = serverAPI.settings
        settings.latencyMs = try body.int("latency_ms", in: 0...FakeAppStoreConfiguration.maxDelayMs) ?? settings.latencyMs
        settings.outage = try body.bool("outage") ?? settings.outage
        if body.isNull("rate_limit_per_second") {
            settings.ratePerSecond = nil
        } else if let limit = try body.int("rate_limit_per_second", in: 1...1_000_000) {
            settings.ratePerSecond = limit
        }
        settings.faultRate = try body.number("fault_rate", in: 0...1) ?? settings.faultRate
        settings.faultErrorCode = try body.int("fault_error_code", in: 4_000_000...5_999_999) ?? settings.faultErrorCode
        settings.faultSeed = try body.int("fault_seed", in: 0...Int.max).map(UInt64.init) ?? settings.faultSeed
        if body.isNull("fault_mix") {
            settings.faultMix = []
        } else if let mix = try body.objects("fault_mix", allowed: Self.stepKeys, limit: 100) {
            settings.faultMix = try mix.map(Self.step)
        }
        serverAPI.configure(settings)
        return serverAPISettingsResponse()
    }

    /// One step of a scenario or of the fault mix.
    private static func step(_ step: FakeControlBody) throws -> FakeServerAPIState.Step {
        FakeServerAPIState.Step(
            status: try step.int("status", in: 100...599), errorCode: try step.int("error_code", in: 1_000_000...9_999_999),
            errorMessage: try step.string("error_message"), retryAfterMs: try step.int("retry_after_ms", in: 0...86_400_000),
            retryAfter: try step.string("retry_after"),
            delayMs: try step.int("delay_ms", in: 0...FakeAppStoreConfiguration.maxDelayMs) ?? 0, drop: try step.bool("drop") ?? false)
    }

    private static func stepJSON(_ step: FakeServerAPIState.Step) -> JSONValue {
        var members: [String: JSONValue] = [:]
        members["status"] = step.status.map(JSONValue.int)
        members["error_code"] = step.errorCode.map(JSONValue.int)
        members["error_message"] = step.errorMessage.map(JSONValue.string)
        members["retry_after_ms"] = step.retryAfterMs.map(JSONValue.int)
        members["retry_after"] = step.retryAfter.map(JSONValue.string)
        if step.delayMs > 0 { members["delay_ms"] = .int(step.delayMs) }
        if step.drop { members["drop"] = .bool(true) }
        return .object(members)
    }

    private func serverAPISettingsResponse() -> HTTPResponse {
        let settings = serverAPI.settings
        return .json([
            "latency_ms": .int(settings.latencyMs), "outage": .bool(settings.outage),
            "rate_limit_per_second": settings.ratePerSecond.map(JSONValue.int) ?? .null,
            "fault_rate": .double(settings.faultRate), "fault_error_code": .int(settings.faultErrorCode),
            "fault_seed": .int(Int(settings.faultSeed)), "fault_mix": .array(settings.faultMix.map(Self.stepJSON)),
        ] as JSONValue)
    }

    private func addServerAPIScenario(_ request: HTTPRequest) throws -> HTTPResponse {
        let body = try FakeControlBody(request, allowed: ["endpoint", "environment", "steps"])
        let key = FakeServerAPIState.ScenarioKey(endpoint: try body.choice("endpoint", Self.endpoints),
                                                 environment: try body.choice("environment", Self.environments))
        guard let list = try body.objects("steps", allowed: Self.stepKeys, limit: 1_000) else {
            throw body.problem("steps", "an array of 1 to 1000 steps")
        }
        let steps = try list.map(Self.step)
        serverAPI.setScenario(steps, for: key)
        return .json([
            "endpoint": key.endpoint.map { .string($0.rawValue) } ?? .null,
            "environment": key.environment.map { .string($0.rawValue) } ?? .null, "steps": .int(steps.count),
        ] as JSONValue, status: 201)
    }

    private func serverAPIRequestsResponse() -> HTTPResponse {
        let tally = serverAPI.tally
        return .json([
            "count": .int(serverAPI.counts.values.reduce(0, +)),
            "counts": .object(serverAPI.counts.mapValues(JSONValue.int)),
            "statuses": .object(Dictionary(uniqueKeysWithValues: tally.statuses.map { (String($0.key), JSONValue.int($0.value)) })),
            "faults": .int(tally.faults), "dropped": .int(tally.dropped),
            "retry_after": ["early": .int(tally.early), "longest_honoured_ms": .int(Int(tally.longestHonouredMs)),
                            "in_flight_ms": .int(Int(FakeServerAPITally.inFlightMs))],
            "requests": .array(serverAPI.received.map { received in
                var token: JSONValue = .null
                if let claims = received.token {
                    token = [
                        "alg": claims.algorithm.map(JSONValue.string) ?? .null, "typ": claims.type.map(JSONValue.string) ?? .null,
                        "kid": .string(claims.keyID), "iss": .string(claims.issuerID), "bid": .string(claims.bundleID),
                        "aud": .string(claims.audience), "exp": .int(Int(claims.expiresAt.timeIntervalSince1970)),
                        "iat": claims.issuedAt.map { .int(Int($0.timeIntervalSince1970)) } ?? .null,
                    ]
                }
                return [
                    "endpoint": .string(received.endpoint.rawValue), "environment": .string(received.environment.rawValue),
                    "path": .string(received.path), "status": received.status.map(JSONValue.int) ?? .null,
                    "refusal": received.refusal.map(JSONValue.string) ?? .null, "token": token,
                ]
            }),
        ] as JSONValue)
    }
}
