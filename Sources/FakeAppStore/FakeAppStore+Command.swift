import ServiceRuntime
import Foundation

extension FakeAppStore {
    /// Runs `entitlement-service fake-app-store --port N [--host H]`: reads the `FAKE_APPLE_*` variables
    /// (`FakeAppStoreConfiguration(environment:)`), serves until SIGINT or SIGTERM, then shuts down. Returns the
    /// process exit status: 0 after a clean shutdown, 1 when the port cannot be bound, 2 for a bad variable.
    public static func runCommand(host: String, port: Int, environment: [String: String] = ProcessInfo.processInfo.environment) async -> Int32 {
        let configuration: FakeAppStoreConfiguration
        do {
            configuration = try FakeAppStoreConfiguration(environment: environment)
        } catch {
            Log.error("fake_app_store_configuration_invalid", ["error": error.description])
            return 2
        }
        let fake = FakeAppStore(configuration: configuration)
        do {
            _ = try fake.start(host: host, port: port)
        } catch {
            Log.error("fake_app_store_start_failed", ["error": String(describing: error)])
            return 1
        }
        var watchers: [SignalWatcher] = []
        let signal = await withCheckedContinuation { (continuation: CheckedContinuation<Int32, Never>) in
            var resumed = false
            for number in [SIGINT, SIGTERM] {
                watchers.append(SignalWatcher(signal: number) { received in
                    guard !resumed else { return }
                    resumed = true
                    continuation.resume(returning: received)
                })
            }
        }
        for watcher in watchers { watcher.close() }
        Log.info("fake_app_store_stopping", ["signal": signal])
        await fake.shutdown()
        return 0
    }
}
