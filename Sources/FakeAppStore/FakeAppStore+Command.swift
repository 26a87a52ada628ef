import Crypto
import Foundation
import ServiceRuntime

extension FakeAppStore {
    /// Runs `entitlement-service fake-app-store --port N [--host H] [--root-certificate-out PATH]`: reads the
    /// `FAKE_APPLE_*` variables (`FakeAppStoreConfiguration(environment:)`), loads or makes the Server API key
    /// (`FAKE_APPLE_API_KEY_FILE`) and the signing chain
    /// (`FAKE_APPLE_SIGNING_DIR`), writes its root certificate to `rootCertificateOut` (else
    /// `FAKE_APPLE_ROOT_CERTIFICATE_FILE`) before the port is bound, so that the file is there once the fake
    /// answers, serves until SIGINT or SIGTERM, then shuts down. Returns the process exit status: 0 after a
    /// clean shutdown, 1 when the port cannot be bound, 2 for a bad variable, a key file that cannot be read
    /// or written, or a signing chain that cannot be loaded or written.
    public static func runCommand(
        host: String, port: Int, rootCertificateOut: String? = nil,
        environment: [String: String] = ProcessInfo.processInfo.environment
    ) async -> Int32 {
        let configuration: FakeAppStoreConfiguration
        let chain: FakeSigningChain
        let apiKey: P256.Signing.PrivateKey
        do {
            configuration = try FakeAppStoreConfiguration(environment: environment)
            apiKey = try configuration.apiKeyFile.map(FakeServerAPIKey.loadOrCreate(path:)) ?? P256.Signing.PrivateKey()
        } catch {
            Log.error("fake_app_store_configuration_invalid", ["error": error.description])
            return 2
        }
        do {
            chain = try configuration.signingDirectory.map(FakeSigningChain.init(directory:)) ?? .make()
            if let path = rootCertificateOut ?? configuration.rootCertificateFile {
                try chain.writeRootCertificate(to: path)
                Log.info("fake_app_store_root_certificate_written", ["path": path])
            }
        } catch {
            Log.error("fake_app_store_signing_chain_failed", ["error": error.description])
            return 2
        }
        let fake = FakeAppStore(configuration: configuration, signingChain: chain, serverAPIKey: apiKey)
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
