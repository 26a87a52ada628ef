import AppStore
import ServiceRuntime
import EntitlementModel
import Foundation

/// The running service: database pools, migrations, catalog, entitlement cache and its listener, App Store
/// client, routes, HTTP server and background workers, started in that order and stopped in reverse on
/// SIGTERM/SIGINT.
@Loop
final class Application {
    let configuration: Configuration
    let pool: PostgresPool
    /// A small pool of its own for entitlement reads (`EntitlementReader`): concurrent reads queue for few
    /// connections and so go out in full batches (`UserSnapshotLoader`), and never wait behind writes or reports.
    let readPool: PostgresPool
    /// Reads users' snapshots on `readPool`, in batches.
    let snapshots: UserSnapshotLoader
    let server: HTTPServer
    let receipts: ReceiptService
    /// Entitlement answers at the present time, kept until the database announces a change.
    let cache: EntitlementCache
    /// Hears the database's change announcements (and barriers' tokens) for `cache`.
    let listener: PostgresListener
    private let workers: [PeriodicWorker]
    /// Sends events to `WEBHOOK_URL`; nil without it (events are recorded, not sent).
    let webhooks: WebhookDispatcher?
    private var signals: [SignalWatcher] = []
    private let lagMonitor = LoopLagMonitor()
    private var stopping = false
    /// How long a stored notification is left to the request applying it (and a claimed one to the worker)
    /// before the worker takes it (again).
    static let notificationLease = Duration.seconds(10)

    /// Connects, migrates, imports the catalog and wires every route; nothing listens yet. `writes` is the count
    /// of answered writes shared with the `WORKERS` copies on the same socket (nil when serving alone). A copy
    /// (`isCopy`) neither migrates nor imports `PRODUCTS_FILE`: its first process did both before starting it, and
    /// a copy started later to replace one that died must not undo the catalog edits made since.
    init(configuration: Configuration, migrationsDirectory: URL, writes: SharedCounter? = nil, isCopy: Bool = false) async throws {
        self.configuration = configuration
        guard let databaseURL = configuration.databaseURL else {
            throw ConfigurationError(variable: "DATABASE_URL", problem: "is required (a libpq conninfo or URI)")
        }
        pool = PostgresPool(conninfo: databaseURL, size: configuration.databasePoolSize)
        readPool = PostgresPool(conninfo: databaseURL, size: configuration.databaseReadPoolSize)
        snapshots = UserSnapshotLoader(pool: readPool)
        if !isCopy {
            let applied = try await Migrator(pool: pool, directory: migrationsDirectory).run()
            Log.info("migrations_applied", ["count": applied.count])
        }

        let catalog = CatalogCache(db: pool)
        if let file = configuration.productsFile, !isCopy {
            let imported = try await CatalogEditor(db: pool, catalog: catalog).importFile(file)
            Log.info("catalog_imported", ["file": file, "products": imported.products, "stored": imported.stored])
        }
        let cache = EntitlementCache(capacity: configuration.entitlementCacheSize, db: pool, writes: writes) { [catalog] in
            catalog.invalidate()
        }
        self.cache = cache
        if writes != nil { catalog.hasUnheardWrites = { [unowned cache] in !cache.hasHeardEveryWrite(now: Date()) } }
        listener = PostgresListener(
            EntitlementCache.listenerSettings(conninfo: databaseURL),
            onNotification: { cache.received($0) }, onStateChange: { cache.listenerChanged(listening: $0) },
            onWindow: { cache.listenerWindow(endsAt: $0) })
        let http = HTTPClient(configuration: HTTPClientConfiguration(
            caBundlePath: configuration.appleCABundle, maxConnections: 256,
            connectTimeoutMs: configuration.appleConnectTimeoutMs, totalTimeoutMs: configuration.appleTimeoutMs))
        let verifier = AppStoreClient(http: http, settings: AppStoreSettings(configuration))
        let retry = RetrySchedule(baseMs: configuration.retryBaseMs, maxMs: configuration.retryMaxMs)
        let events = EventRecorder(catalog: catalog, delivers: configuration.webhooks != nil)
        receipts = ReceiptService(db: pool, catalog: catalog, verifier: verifier, restorePolicy: configuration.restorePolicy,
                                  retry: retry, appleTimeoutMs: configuration.appleTimeoutMs, events: events)

        // `/v1` wants an app or admin key and each query parameter once, its answers are never cached by
        // clients, and its changes are visible on this instance once answered (`ChangeBarrier`); `/v1/admin`
        // wants an admin key; Apple's notifications (under `/v1`, outside the group) and the system routes want none.
        let keys = APIKeys(appKeys: configuration.apiKeys, adminKeys: configuration.adminAPIKeys)
        let reader = EntitlementReader(snapshots: snapshots, catalog: catalog)
        let signatures = SignedDataVerifier(configuration)
        let router = Router()
        let keyed = router.group("/v1", HTTPResponseHeaders(["Cache-Control": "no-store"]), KeyAuthentication(keys: keys),
                                 ChangeBarrier(cache: cache))
        let v1 = keyed.group("", UniqueQueryNames())  // after the scope checks: an app key on an admin route is a 403 first
        SystemRoutes(db: pool).register(on: router)
        ConsoleRoutes().register(on: router)
        PurchaseRoutes(db: pool, receipts: receipts, reader: reader, ledger: ConsumableLedger(db: pool, events: events), orders: OrderStore(),
                       catalog: catalog, cache: cache, bundleID: configuration.appleBundleID).register(on: v1)
        StoreKitRoutes(db: pool, signatures: signatures, recorder: receipts.recorder, reader: reader, catalog: catalog).register(on: v1)
        let intake = NotificationIntake(signatures: signatures, db: pool, recorder: receipts.recorder, catalog: catalog,
                                        lease: Self.notificationLease)
        NotificationRoutes(sharedSecret: configuration.appleSharedSecret, intake: intake)
            .register(on: router.group("/v1", ChangeBarrier(cache: cache)))
        let admin = keyed.group("/admin", AdminScope(), UniqueQueryNames())
        AdminRoutes(db: pool, catalog: catalog, events: events).register(on: admin)
        NotificationAdminRoutes(db: pool).register(on: admin)
        WebhookRoutes(db: pool, delivers: configuration.webhooks != nil).register(on: admin)
        CustomerRoutes(view: CustomerView(db: pool, catalog: catalog)).register(on: admin)
        var serverAPI: ServerAPIClient?
        var sync: AppleAccountSync?
        var history: NotificationHistoryWorker.Settings?
        if let settings = ServerAPISettings(configuration) {
            let client = ServerAPIClient(http: http, settings: settings, verifier: signatures)
            serverAPI = client
            sync = AppleAccountSync(client: client, db: pool, recorder: receipts.recorder, catalog: catalog)
            history = NotificationHistoryWorker.Settings(
                intake: intake, client: client,
                environments: [StoreEnvironment.production, .sandbox].filter { environment in
                    configuration.appleSignedEnvironments.contains { $0.rawValue == environment.rawValue }
                },
                interval: .seconds(configuration.appleServerAPI.notificationHistoryIntervalS), retry: retry)
        }
        AppleAdminRoutes(sync: sync, reader: reader).register(on: admin)
        LookupRoutes(lookup: CustomerLookup(db: pool)).register(on: admin)
        ReceiptInspectionRoutes(db: pool, bundleID: configuration.appleBundleID).register(on: admin)
        CapabilityRoutes(appStoreServerAPI: sync != nil, webhooks: configuration.webhooks != nil).register(on: admin)
        server = HTTPServer(configuration: HTTPServerConfiguration(
            host: configuration.listenAddress, port: configuration.port, maxConnections: configuration.maxConnections), router: router)

        let tick = UInt64(min(1_000, max(50, configuration.retryBaseMs / 4)))
        workers = [
            RetryWorker.make(service: receipts, intervalMs: tick),
            RenewalRefresher.make(service: receipts, serverAPI: serverAPI, intervalMs: 5_000),
            RetryBacklog.make(submissions: receipts.submissions, db: pool, intervalMs: 5_000),
            NotificationWorker.make(recorder: receipts.recorder, catalog: catalog, retry: retry, lease: Self.notificationLease,
                                    intervalMs: 500),
            ExpirationWorker.make(db: pool, events: events, intervalMs: 500),
        ] + (history.map { [NotificationHistoryWorker.make($0, pollMs: 1_000)] } ?? [])
        if let history { try await NotificationHistoryWorker.dueAtStart(history) }
        let pool = pool
        webhooks = configuration.webhooks.map { WebhookDispatcher(db: pool, settings: $0, conninfo: databaseURL) }
        registerMetrics()
    }

    /// Starts the cache's listener, listens (on `socket` when given, else on the configured address) and
    /// starts the workers; returns the bound port.
    func start(socket: Int32? = nil) throws -> Int {
        listener.start()
        let port = try socket.map(server.start(socket:)) ?? server.start()
        for worker in workers { worker.start() }
        webhooks?.start()
        lagMonitor.start()
        Log.info("serving", ["address": configuration.listenAddress, "port": port, "pid": getpid()])
        return port
    }

    /// Stops accepting, finishes in-flight requests, stops the workers and closes the pools. Verifications
    /// still in flight stay durable in the database and are taken up by the next instance's retry worker.
    func shutdown() async {
        guard !stopping else { return }
        stopping = true
        Log.info("shutting_down")
        receipts.beginShutdown()
        await server.shutdown()
        for worker in workers { await worker.stop() }
        await webhooks?.stop()
        await receipts.releaseClaims()
        await listener.stop()
        await pool.close()
        await readPool.close()
        lagMonitor.stop()
        Log.info("stopped", ["pid": getpid()])
    }

    /// Runs until SIGTERM or SIGINT, then shuts down gracefully. `received` sees the signal first (the
    /// first process passes it on to its copies there, before draining). SIGHUP (a closed terminal, or an operator
    /// expecting a reload) is logged and ignored: there is nothing to reload, and its default would kill the process
    /// with requests in flight.
    func runUntilSignalled(_ received: @escaping @Loop (Int32) -> Void = { _ in }) async {
        signals.append(SignalWatcher(signal: SIGHUP) { number in
            Log.info("signal_ignored", ["signal": number, "pid": getpid()])
        })
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            var resumed = false
            for signal in [SIGTERM, SIGINT] {
                signals.append(SignalWatcher(signal: signal) { number in
                    Log.info("signal", ["signal": number, "pid": getpid()])
                    guard !resumed else { return }
                    resumed = true
                    received(number)
                    continuation.resume()
                })
            }
        }
        await shutdown()
        for watcher in signals { watcher.close() }
    }

    private func registerMetrics() {
        for (name, pool) in [("main", pool), ("reads", readPool)] {
            let labels = ["pool": name]
            Metrics.shared.gauge("db_pool_in_use", "Database connections lent out", labels: labels) { Double(pool.inUse) }
            Metrics.shared.gauge("db_pool_waiting", "Callers waiting for a database connection", labels: labels) { Double(pool.waiting) }
            Metrics.shared.counter("db_pool_reads_answered_together_total", "Read-only transactions sent in another caller's round trip",
                                   labels: labels) { Double(pool.readsAnsweredTogether) }
        }
        let snapshots = self.snapshots
        Metrics.shared.counter("entitlement_reads_batched_total", "Entitlement reads sent in a batch with an earlier one") {
            Double(snapshots.readsBatched)
        }
        let receipts = self.receipts
        Metrics.shared.gauge("receipt_verifications_in_flight", "Verifications running in this process") { Double(receipts.inFlightCount) }
        ProcessMetrics.register(on: Metrics.shared)
        cache.registerMetrics(on: Metrics.shared)
        guard let webhooks else { return }
        Metrics.shared.gauge("webhook_deliveries_in_flight", "Webhook requests in flight in this process") { Double(webhooks.inFlightCount) }
    }
}
