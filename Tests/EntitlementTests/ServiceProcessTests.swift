import EntitlementModel
import Foundation
import Testing
@testable import AppStore
@testable import EntitlementService
@testable import FakeAppStore
@testable import ServiceRuntime

/// What only a real process shows: graceful SIGTERM, and no receipt lost or counted twice across SIGKILL.
@Suite(.serialized, .timeLimit(.minutes(3)))
@Loop
struct ServiceProcessTests {
    /// A fresh database, the fake App Store in-process (answering after `latencyMs`), and the environment a
    /// child service needs.
    private func setUp(latencyMs: Int = 0) async throws -> TestService {
        try await TestService.prepare(
            "proc", catalog: ServiceHarness.catalog, bundleID: ServiceHarness.bundleID,
            fake: FakeAppStoreConfiguration(sharedSecret: ServiceHarness.sharedSecret, latencyMs: latencyMs),
            environment: ["API_KEYS": ServiceHarness.appKey, "APPLE_TIMEOUT_MS": "1000", "RETRY_BASE_MS": "100", "RETRY_MAX_MS": "500"])
    }

    private func post(_ receipt: FakeReceipt, user: String, port: Int, waitMs: Int) async throws -> RawHTTPClient.Response {
        let json = String(decoding: try JSONEncoder().encode(["user_id": user, "receipt_data": receipt.receiptData]), as: UTF8.self)
        let text = RawHTTPClient.request("POST", "/v1/receipts?wait_ms=\(waitMs)",
                                         headers: [("Authorization", "Bearer \(ServiceHarness.appKey)")], body: json)
        return try await RawHTTPClient.exchange(port: port, text, timeout: 30)
    }

    @Test func sighupIsIgnoredAndSigtermFinishesInFlightRequestsAndExitsZero() async throws {
        // Apple answers in 600 ms, within APPLE_TIMEOUT_MS (1 s) and the shutdown's grace.
        let setup = try await setUp(latencyMs: 600)
        let (fake, environment) = (setup.fake, setup.environment)
        let service = try await offLoop { try ServiceProcess(environment: environment) }
        let receipt = FakeReceipt(bundleID: ServiceHarness.bundleID).with {
            $0.addPurchase("com.example.lifetime", transactionID: "term-1", purchased: Date())
        }
        let inFlight = Task { try await post(receipt, user: "term-user", port: service.port, waitMs: 20_000) }
        // The request is in flight once the fake has seen it.
        let deadline = RawHTTPClient.now() + 10
        while fake.state.received.isEmpty && RawHTTPClient.now() < deadline { await LoopTimer.sleep(milliseconds: 10) }
        // SIGHUP first: ignored (its default would kill the process and the request with it).
        service.signal(SIGHUP)
        let signalled = RawHTTPClient.now()
        service.signal(SIGTERM)
        let answer = try await inFlight.value
        // Apple answers within the shutdown's grace: the request finishes with its verdict.
        #expect(answer.status == 200, "\(answer.text) \(service.log)")
        let status = try await offLoop { service.waitForExit(timeout: 10) }
        #expect(status == 0, "\(service.log)")
        #expect(RawHTTPClient.now() - signalled < 10)
        #expect(service.log.contains("event=signal_ignored") && service.log.contains("event=stopped"))
        await setup.tearDown()
    }

    /// A copy does not outlive its first process, even one killed outright: the kernel sends it SIGTERM.
    @Test func aCopyStopsWhenItsFirstProcessIsKilled() async throws {
        let setup = try await setUp()
        let service = try await offLoop { try ServiceProcess(environment: setup.environment.merging(["WORKERS": "2"]) { $1 }) }
        let parent = service.process.processIdentifier
        _ = await eventually(timeout: 30) { service.servingPIDs(port: service.port).count == 2 }
        let child = try #require(service.servingPIDs(port: service.port).first { $0 != parent }, "\(service.log)")
        service.signal(SIGKILL)
        _ = await eventually(timeout: 30) { service.log.contains("event=stopped pid=\(child)") }
        #expect(service.log.contains("event=signal signal=15 pid=\(child)") && service.log.contains("event=stopped pid=\(child)"), "\(service.log)")
        await #expect(throws: RawHTTPClient.Failure.self) { try await offLoop { try RawHTTPClient(port: service.port) } }
        await setup.tearDown()
    }

    /// A receipt posted while Apple is down, then verified by the retry worker: its attempts are counted by
    /// outcome and Apple status, the backlog shows it while it waits, and the process figures are plausible.
    @Test func metricsCountVerificationsAndShowTheBacklogAndTheProcess() async throws {
        let setup = try await setUp()
        setup.fake.state.configure(sharedSecret: nil, latencyMs: nil, outage: true)
        let started = Date().timeIntervalSince1970
        let service = try await offLoop { try ServiceProcess(environment: setup.environment) }
        let receipt = FakeReceipt(bundleID: ServiceHarness.bundleID).with {
            $0.addPurchase("com.example.lifetime", transactionID: "metrics-1", purchased: Date())
        }
        #expect(try await post(receipt, user: "metrics-user", port: service.port, waitMs: 5_000).status == 202)
        let metrics = { try await RawHTTPClient.exchange(port: service.port, RawHTTPClient.request("GET", "/metrics")).text }
        // The backlog is read every 5 s, not at scrape time.
        var text = ""
        _ = try await eventually(timeout: 20, everyMs: 200) {
            text = try await metrics()
            return text.contains("\nreceipt_retry_backlog 1\n")
        }
        #expect(text.contains("\nreceipt_retry_backlog 1\n"), "\(text)")
        #expect(text.contains(#"receipt_verifications_total{outcome="retry_later",apple_status="none"} "#), "\(text)")
        let age = try #require(Self.value(of: "receipt_retry_oldest_age_seconds", in: text))
        #expect(age >= 0 && age < 60)
        let start = try #require(Self.value(of: "process_start_time_seconds", in: text))
        #expect(abs(start - started) < 30)
        #expect(try #require(Self.value(of: "process_resident_memory_bytes", in: text)) > 1_000_000)
        #expect(try #require(Self.value(of: "process_open_fds", in: text)) > 3)
        #expect(try #require(Self.value(of: "process_cpu_seconds_total", in: text)) > 0)
        #expect(text.contains("# TYPE process_cpu_seconds_total counter"))

        setup.fake.state.configure(sharedSecret: nil, latencyMs: nil, outage: false)
        _ = try await eventually(timeout: 20, everyMs: 200) {
            text = try await metrics()
            return text.contains("\nreceipt_retry_backlog 0\n")
        }
        #expect(text.contains(#"receipt_verifications_total{outcome="verified",apple_status="0"} 1"#), "\(text)")
        #expect(text.contains("\nreceipt_retry_backlog 0\n") && text.contains("\nreceipt_retry_oldest_age_seconds 0\n"), "\(text)")
        service.signal(SIGTERM)
        #expect(try await offLoop { service.waitForExit(timeout: 10) } == 0)
        await setup.tearDown()
    }

    /// The value of an unlabelled sample in Prometheus text.
    private static func value(of name: String, in text: String) -> Double? {
        text.split(separator: "\n").first { $0.hasPrefix(name + " ") }.flatMap { Double($0.dropFirst(name.count + 1)) }
    }

    @Test func sigkillLosesNothingAndCountsNothingTwice() async throws {
        let setup = try await setUp(latencyMs: 3_000)
        let (fake, environment) = (setup.fake, setup.environment)
        let first = try await offLoop { try ServiceProcess(environment: environment) }
        let count = 12
        var receipts: [FakeReceipt] = []
        for index in 0..<count {
            receipts.append(FakeReceipt(bundleID: ServiceHarness.bundleID).with {
                $0.addPurchase("com.example.coins.100", transactionID: "kill-\(index)", purchased: Date())
            })
        }
        for (index, receipt) in receipts.enumerated() {
            let answer = try await post(receipt, user: "kill-user-\(index % 3)", port: first.port, waitMs: 0)
            #expect(answer.status == 202, "\(answer.text)")
        }
        // Killed while every verification is in flight (the fake holds each answer for 3 s).
        first.signal(SIGKILL)
        _ = try await offLoop { first.waitForExit(timeout: 10) }
        fake.state.configure(sharedSecret: nil, latencyMs: 0, outage: nil)

        let second = try await offLoop { try ServiceProcess(environment: environment) }
        let connection = try await PostgresConnection.connect(setup.databaseURL)
        let deadline = RawHTTPClient.now() + 60
        var verified = 0
        while RawHTTPClient.now() < deadline {
            verified = try await connection.query("SELECT count(*)::int AS n FROM receipt_submissions WHERE status = 'verified'", []).rows[0].int("n")
            if verified == count { break }
            await LoopTimer.sleep(milliseconds: 100)
        }
        #expect(verified == count, "\(second.log)")
        let submissions = try await connection.query("SELECT count(*)::int AS n FROM receipt_submissions", []).rows[0].int("n")
        #expect(submissions == count)
        let credits = try await connection.query("SELECT count(*)::int AS n, count(DISTINCT transaction_id)::int AS d FROM consumable_ledger WHERE kind = 'credit'", []).rows[0]
        #expect(try credits.int("n") == count && credits.int("d") == count)
        let balance = try await connection.query("SELECT sum(balance)::int AS total FROM consumable_balances", []).rows[0].int("total")
        #expect(balance == count * 100)
        connection.close()
        second.signal(SIGTERM)
        #expect(try await offLoop { second.waitForExit(timeout: 10) } == 0)
        await setup.tearDown()
    }

    /// A start-up failure past the configuration (here a catalog file that is not there) is one log line, not
    /// that line and a copy of it, and exit status 1.
    @Test func aStartupFailureIsOneLine() async throws {
        let setup = try await setUp()
        let environment = setup.environment.merging(["PRODUCTS_FILE": "/nonexistent/products.json"]) { $1 }
        let broken = try await offLoop { try ServiceProcess(environment: environment, waitUntilServing: false) }
        #expect(try await offLoop { broken.waitForExit(timeout: 30) } == 1)
        let lines = broken.log.split(separator: "\n").filter { $0.contains("level=error") || !$0.hasPrefix("ts=") }
        #expect(lines.count == 1 && lines[0].contains("event=startup_failed") && lines[0].contains("PRODUCTS_FILE"), "\(broken.log)")
        // A database that cannot be reached is named by its setting.
        let nowhere = setup.environment.merging(["DATABASE_URL": "host=127.0.0.1 port=1 dbname=x"]) { $1 }
        let unreachable = try await offLoop { try ServiceProcess(environment: nowhere, waitUntilServing: false) }
        #expect(try await offLoop { unreachable.waitForExit(timeout: 30) } == 1)
        let failures = unreachable.log.split(separator: "\n").filter { $0.contains("level=error") || !$0.hasPrefix("ts=") }
        #expect(failures.count == 1 && failures[0].contains("event=startup_failed variable=DATABASE_URL"), "\(unreachable.log)")
        await setup.tearDown()
    }

    /// `WORKERS=2`: a copy killed while the service runs is logged and replaced; the replacement serves on the
    /// same socket and stops with the rest, and does not import `PRODUCTS_FILE` again over the catalog edits
    /// made since the start.
    @Test func aCopyThatDiesIsReplaced() async throws {
        let setup = try await setUp()
        let environment = setup.environment.merging(["WORKERS": "2", "ADMIN_API_KEYS": ServiceHarness.adminKey]) { $1 }
        let service = try await offLoop { try ServiceProcess(environment: environment) }
        let (port, parent) = (service.port, service.process.processIdentifier)
        _ = await eventually(timeout: 30) { service.servingPIDs(port: port).count == 2 }
        let child = try #require(service.servingPIDs(port: port).first { $0 != parent }, "\(service.log)")
        let admin = [("Authorization", "Bearer \(ServiceHarness.adminKey)")]
        let edit = try await RawHTTPClient.exchange(port: port, RawHTTPClient.request(
            "PUT", "/v1/admin/products/com.example.lifetime", headers: admin,
            body: #"{"type": "non_consumable", "entitlements": ["edited-by-admin"]}"#))
        #expect(edit.status == 200 || edit.status == 201, "\(edit.text)")
        kill(child, SIGKILL)
        _ = await eventually(timeout: 30) { service.servingPIDs(port: port).count == 3 }
        let pids = service.servingPIDs(port: port)
        let replacement = try #require(pids.first { $0 != parent && $0 != child }, "\(service.log)")
        #expect(service.log.contains("event=worker_process_exited pid=\(child) signal=9 expected=false"), "\(service.log)")
        #expect(service.log.contains("event=worker_process_replacing index=1"), "\(service.log)")
        let answered = try await offLoop {
            (0..<400).contains { _ in
                guard let client = try? RawHTTPClient(port: port), (try? client.send(RawHTTPClient.request("GET", "/healthz"))) != nil,
                      (try? client.readResponse().status) == 200 else { return false }
                return ServiceProcess.pid(serving: client, port: port, among: [replacement]) == replacement
            }
        }
        #expect(answered, "the replacement accepts on the shared socket")
        let catalog = try await RawHTTPClient.exchange(port: port, RawHTTPClient.request("GET", "/v1/admin/products", headers: admin))
        #expect(catalog.text.contains("edited-by-admin"), "the replacement left the edit in place: \(catalog.text)")
        #expect(service.log.split(separator: "\n").filter { $0.contains("event=catalog_imported") }.count == 1, "\(service.log)")
        service.signal(SIGTERM)
        #expect(try await offLoop { service.waitForExit(timeout: 20) } == 0)
        #expect(service.log.contains("event=stopped pid=\(replacement)"), "\(service.log)")
        await setup.tearDown()
    }

    /// `WORKERS=2`: a write answered by one copy is read at once from the other copy's cache, whichever copy
    /// the client's next request reaches (both listen on one address), in turn both ways, 600 times (without
    /// the shared write count, about one round in 400 read stale).
    @Test func aWriteAnsweredByOneCopyIsNeverReadStaleFromTheOther() async throws {
        let setup = try await setUp()
        let environment = setup.environment.merging(["WORKERS": "2", "ADMIN_API_KEYS": ServiceHarness.adminKey]) { $1 }
        let service = try await offLoop { try ServiceProcess(environment: environment) }
        let port = service.port
        _ = await eventually(timeout: 30) { service.servingPIDs(port: port).count == 2 }
        let pids = service.servingPIDs(port: port)
        try #require(Set(pids).count == 2, "\(service.log)")
        // One keep-alive connection held to each copy.
        let clients = try await offLoop {
            var byCopy: [Int32: RawHTTPClient] = [:]
            for _ in 0..<400 where byCopy.count < 2 {
                let client = try RawHTTPClient(port: port)
                try client.send(RawHTTPClient.request("GET", "/healthz"))
                guard try client.readResponse().status == 200, let owner = ServiceProcess.pid(serving: client, port: port, among: pids) else { continue }
                if byCopy[owner] == nil { byCopy[owner] = client }
            }
            return Array(byCopy.values)
        }
        try #require(clients.count == 2, "\(service.log)")
        let read = RawHTTPClient.request("GET", "/v1/users/copies-user/entitlements", headers: [("Authorization", "Bearer \(ServiceHarness.appKey)")])
        let stale = try await offLoop {
            var stale: [Int] = []
            for round in 0..<600 {
                let (writer, reader) = round.isMultiple(of: 2) ? (clients[0], clients[1]) : (clients[1], clients[0])
                try reader.send(read)
                #expect(try reader.readResponse().status == 200)  // fills the reader's cache
                try writer.send(RawHTTPClient.request(
                    "POST", "/v1/admin/users/copies-user/grants", headers: [("Authorization", "Bearer \(ServiceHarness.adminKey)")],
                    body: #"{"entitlement": "e\#(round)", "reason": "copies"}"#))
                let granted = try writer.readResponse()
                try #require(granted.status == 201, "\(granted.text)")
                try reader.send(read)
                let after = try reader.readResponse()
                if !after.text.contains("\"e\(round)\"") { stale.append(round) }
            }
            return stale
        }
        #expect(stale.isEmpty, "rounds read stale from the other copy: \(stale)")
        service.signal(SIGTERM)
        #expect(try await offLoop { service.waitForExit(timeout: 20) } == 0)
        await setup.tearDown()
    }

    /// `WORKERS=2` with `PORT=0`: the first process binds a free port once and its copy inherits the socket;
    /// both accept on it; a `serve` started by mistake on that port fails with one line; SIGTERM to the first
    /// process reaches the copy at once, not after the first has drained.
    @Test func workersShareOneSocketRefuseIntrudersAndStopTogether() async throws {
        let setup = try await setUp()
        let service = try await offLoop { try ServiceProcess(environment: setup.environment.merging(["WORKERS": "2"]) { $1 }) }
        let (port, parent) = (service.port, service.process.processIdentifier)
        #expect(port != 0)
        _ = await eventually(timeout: 30) { service.servingPIDs(port: port).count == 2 }
        let pids = service.servingPIDs(port: port)
        try #require(Set(pids).count == 2 && pids.contains(parent), "\(service.log)")
        let child = pids.first { $0 != parent }!
        // The first process warns once of what is missing (here the admin keys), naming no value.
        let warnings = service.log.split(separator: "\n").filter { $0.contains("event=configuration_warning") }
        #expect(warnings.count == 1 && warnings[0].contains("level=warn") && warnings[0].contains("variable=ADMIN_API_KEYS"), "\(service.log)")
        #expect(!service.log.contains(ServiceHarness.appKey) && !service.log.contains(ServiceHarness.sharedSecret))

        // Both processes accept connections on the one socket: the server end of each connection is in one
        // of them, and over enough connections in each. A connection to the first one is kept for later.
        let (answered, kept) = try await offLoop {
            var answered: Set<Int32> = []
            var kept: RawHTTPClient?
            for _ in 0..<400 where answered.count < 2 || kept == nil {
                let client = try RawHTTPClient(port: port)
                try client.send(RawHTTPClient.request("GET", "/healthz"))
                guard try client.readResponse().status == 200,
                      let owner = ServiceProcess.pid(serving: client, port: port, among: pids) else { continue }
                answered.insert(owner)
                if owner == parent { kept = client }
            }
            return (answered, kept)
        }
        #expect(answered == Set(pids))
        let held = try #require(kept)

        // A second `serve` on the port fails start-up with one line, before it touches the database.
        let intruder = try await offLoop {
            try ServiceProcess(environment: setup.environment.merging(["PORT": String(port)]) { $1 }, waitUntilServing: false)
        }
        #expect(try await offLoop { intruder.waitForExit(timeout: 30) } == 1)
        let lines = intruder.log.split(separator: "\n")
        #expect(lines.count == 1 && lines[0].contains("event=startup_failed") && lines[0].contains("Address already in use"), "\(intruder.log)")

        // A request held in the first process (its table locked) keeps it draining; the copy stops meanwhile.
        let locker = try await PostgresConnection.connect(setup.databaseURL)
        _ = try await locker.query("BEGIN")
        _ = try await locker.query("LOCK TABLE orders IN ACCESS EXCLUSIVE MODE")
        try await offLoop {
            try held.send(RawHTTPClient.request("GET", "/v1/orders/\(UUID().uuidString.lowercased())",
                                                headers: [("Authorization", "Bearer \(ServiceHarness.appKey)")]))
        }
        // Watched from outside the locking transaction, whose view of pg_stat_activity stays as first read.
        let observer = try await PostgresConnection.connect(setup.databaseURL)
        let blocked = try await eventually(timeout: 30) {
            try await observer.query(
                "SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%FROM orders%'").rows[0].int("n") == 1
        }
        observer.close()
        try #require(blocked)
        let signalled = RawHTTPClient.now()
        service.signal(SIGTERM)
        _ = await eventually(timeout: 20) { service.log.contains("event=stopped pid=\(child)") }
        #expect(service.log.contains("event=signal signal=15 pid=\(child)"), "\(service.log)")
        #expect(service.log.contains("event=stopped pid=\(child)"), "\(service.log)")
        #expect(!service.log.contains("event=stopped pid=\(parent)") && service.process.isRunning)
        _ = try await locker.query("COMMIT")
        locker.close()
        #expect(try await offLoop { try held.readResponse(timeout: 10).status } == 404)
        #expect(try await offLoop { service.waitForExit(timeout: 10) } == 0)
        #expect(RawHTTPClient.now() - signalled < 10)
        #expect(service.log.contains("event=stopped pid=\(parent)"), "\(service.log)")
        await setup.tearDown()
    }
}
