import Foundation
@testable import AppStore
@testable import EntitlementService
@testable import FakeAppStore
@testable import ServiceRuntime

/// The `entitlement-service` executable run as a child process, for what only a real process shows:
/// SIGTERM and SIGKILL. It is the binary built next to the test bundle.
final class ServiceProcess: @unchecked Sendable {
    let process = Process()
    private let errors = Pipe()
    private let lock = NSLock()
    private var output = ""
    private(set) var port = 0

    static var executable: URL {
        URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("entitlement-service")
    }

    /// Starts the executable with `arguments` (`serve` unless given) and `environment` (PORT=0 is added), and
    /// waits until it logs `readyEvent` with the port it listens on.
    init(arguments: [String] = ["serve"], environment: [String: String], readyEvent: String = "serving", timeout: Double = 60) throws {
        process.executableURL = Self.executable
        process.arguments = arguments
        process.environment = ProcessInfo.processInfo.environment.merging(["PORT": "0"].merging(environment) { $1 }) { $1 }
        process.standardError = errors
        process.standardOutput = FileHandle.nullDevice
        errors.fileHandleForReading.readabilityHandler = { [weak self] handle in
            let data = handle.availableData
            guard let self, !data.isEmpty else { return }
            self.lock.withLock { self.output += String(decoding: data, as: UTF8.self) }
        }
        try process.run()
        let deadline = RawHTTPClient.now() + timeout
        while RawHTTPClient.now() < deadline, process.isRunning {
            if let line = log.split(separator: "\n").first(where: { $0.contains("event=\(readyEvent) ") }),
               let field = line.split(separator: " ").first(where: { $0.hasPrefix("port=") }), let port = Int(field.dropFirst(5)) {
                self.port = port
                return
            }
            usleep(20_000)
        }
        throw RawHTTPClient.Failure.malformed("the service did not start: \(log)")
    }

    /// Everything the process wrote to standard error so far.
    var log: String { lock.withLock { output } }

    func signal(_ number: Int32) {
        kill(process.processIdentifier, number)
    }

    /// Waits for the process to exit, at most `timeout` seconds; its exit status, or nil if it still runs.
    /// Once it has exited, `log` holds everything it wrote.
    func waitForExit(timeout: Double) -> Int32? {
        let deadline = RawHTTPClient.now() + timeout
        while process.isRunning && RawHTTPClient.now() < deadline { usleep(10_000) }
        guard !process.isRunning else { return nil }
        let reader = errors.fileHandleForReading
        reader.readabilityHandler = nil
        let rest = reader.readDataToEndOfFile()
        lock.withLock { output += String(decoding: rest, as: UTF8.self) }
        return process.terminationStatus
    }

    deinit {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        errors.fileHandleForReading.readabilityHandler = nil
    }
}
