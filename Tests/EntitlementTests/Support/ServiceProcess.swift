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
    /// waits until it logs `readyEvent` with the port it listens on; with `waitUntilServing` false, returns at
    /// once (for a process expected to fail).
    init(arguments: [String] = ["serve"], environment: [String: String], readyEvent: String = "serving", timeout: Double = 60,
         waitUntilServing: Bool = true) throws {
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
        guard waitUntilServing else { return }
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

    /// The process ids in the `serving` lines logged so far on `port` (the first process's and its copies').
    func servingPIDs(port: Int) -> [Int32] {
        log.split(separator: "\n").filter { $0.contains("event=serving") && $0.contains(" port=\(port) ") }.compactMap { line in
            line.split(separator: " ").first { $0.hasPrefix("pid=") }.flatMap { Int32($0.dropFirst(4)) }
        }
    }

    /// Which of `pids` holds the server end of `client`'s connection to `port` (IPv4 loopback): the socket
    /// whose addresses match in /proc/net/tcp, looked up among each process's descriptors.
    static func pid(serving client: RawHTTPClient, port: Int, among pids: [Int32]) -> Int32? {
        let ports = (String(format: ":%04X", port), String(format: ":%04X", client.localPort))
        guard let table = ProcessMetrics.contents(of: "/proc/net/tcp") else { return nil }
        let row = table.split(separator: "\n").map { $0.split(separator: " ") }.first {
            $0.count > 9 && $0[1].hasSuffix(ports.0) && $0[2].hasSuffix(ports.1)
        }
        guard let inode = row?[9] else { return nil }
        return pids.first { pid in
            let directory = "/proc/\(pid)/fd"
            let descriptors = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
            return descriptors.contains { (try? FileManager.default.destinationOfSymbolicLink(atPath: "\(directory)/\($0)")) == "socket:[\(inode)]" }
        }
    }

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
