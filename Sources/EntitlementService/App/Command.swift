/// What the executable was asked to do, parsed from its arguments.
enum Command: Equatable {
    /// Apply pending migrations, then serve the API (`serve`).
    case serve
    /// Apply pending migrations and exit (`migrate`).
    case migrate
    /// Serve the fake App Store on `port` (`fake-app-store --port N`), writing its signing root to
    /// `rootCertificateOut` first when given.
    case fakeAppStore(port: Int, host: String, rootCertificateOut: String? = nil)
    /// Print usage (`--help`, `-h`, `help`).
    case help

    static let usage = """
        usage: entitlement-service <command>

        commands:
          serve                      apply pending migrations, then serve the API (configuration from the environment)
          migrate                    apply pending migrations and exit
          fake-app-store --port N    serve a fake App Store (verifyReceipt, signed StoreKit 2 data, notifications)
                         [--host H]  (default 127.0.0.1)     for tests, demos and staging
                         [--root-certificate-out PATH]  write its signing root there (DER; PEM for *.pem)
          --help                     show this text

        Environment variables are listed in README.md and ../shared/API.md.
        """

    /// Parses `arguments` (without the program name); throws a one-line message for anything else.
    static func parse(_ arguments: [String]) throws(CommandError) -> Command {
        guard let first = arguments.first else { throw CommandError(message: "missing command (serve, migrate, fake-app-store, --help)") }
        let rest = Array(arguments.dropFirst())
        switch first {
        case "serve", "migrate":
            guard rest.isEmpty else { throw CommandError(message: "\(first) takes no arguments, got '\(rest.joined(separator: " "))'") }
            return first == "serve" ? .serve : .migrate
        case "fake-app-store":
            var port: Int?
            var host = "127.0.0.1"
            var rootCertificateOut: String?
            var index = 0
            while index < rest.count {
                let option = rest[index]
                guard index + 1 < rest.count else { throw CommandError(message: "\(option) needs a value") }
                let value = rest[index + 1]
                switch option {
                case "--port":
                    guard let parsed = Int(value), (0...65535).contains(parsed) else { throw CommandError(message: "--port expects 0-65535, got '\(value)'") }
                    port = parsed
                case "--host":
                    host = value
                case "--root-certificate-out":
                    rootCertificateOut = value
                default:
                    throw CommandError(message: "unknown option '\(option)' for fake-app-store")
                }
                index += 2
            }
            guard let port else { throw CommandError(message: "fake-app-store needs --port N") }
            return .fakeAppStore(port: port, host: host, rootCertificateOut: rootCertificateOut)
        case "--help", "-h", "help":
            return .help
        default:
            throw CommandError(message: "unknown command '\(first)' (serve, migrate, fake-app-store, --help)")
        }
    }
}

/// A command line that could not be understood.
struct CommandError: Error, Equatable {
    var message: String
}
