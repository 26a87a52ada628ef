import AppStore
import EntitlementModel

extension SignedDataEnvironment {
    /// The environment a purchase of this environment is recorded under: Xcode and LocalTesting payloads (accepted
    /// only when `APPLE_SIGNED_ENVIRONMENTS` lists them) count as Sandbox.
    var recorded: StoreEnvironment { self == .production ? .production : .sandbox }
}
