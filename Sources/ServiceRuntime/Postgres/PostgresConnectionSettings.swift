import CPostgres
import Foundation

/// The keyword/value parameters a connection is started with: the caller's conninfo (key=value string or
/// `postgresql://` URI, parsed by libpq) plus the client's own settings.
///
/// Values may hold a password: never log them.
struct PostgresConnectionSettings {
    private(set) var parameters: [(keyword: String, value: String)]

    /// Parses `conninfo` with `PQconninfoParse`; a malformed one fails here. libpq's explanation quotes the
    /// text around the fault, which may be a password, so it is not passed on.
    init(conninfo: String) throws {
        guard !conninfo.containsNULByte else {
            throw PostgresError(kind: .connection, message: "the connection string contains a NUL byte")
        }
        var errorMessage: UnsafeMutablePointer<CChar>?
        guard let options = PQconninfoParse(conninfo, &errorMessage) else {
            if let errorMessage { PQfreemem(errorMessage) }
            throw PostgresError(kind: .connection, message: "invalid connection string: not a libpq key=value string or URI")
        }
        defer { PQconninfoFree(options) }
        var parameters: [(keyword: String, value: String)] = []
        var option = options
        while let keyword = option.pointee.keyword {
            if let value = option.pointee.val {
                parameters.append((String(cString: keyword), String(cString: value)))
            }
            option += 1
        }
        self.parameters = parameters
    }

    subscript(_ keyword: String) -> String? {
        get { parameters.first { $0.keyword == keyword }?.value }
        set {
            parameters.removeAll { $0.keyword == keyword }
            if let newValue { parameters.append((keyword, newValue)) }
        }
    }

    /// Adds the service's defaults, keeping whatever the caller's conninfo chose itself:
    /// - `application_name`, so the connection is recognisable in `pg_stat_activity`;
    /// - UTF-8 client encoding and ISO DateStyle, which the decoders rely on, and the UTC time zone, which
    ///   calendar arithmetic on `timestamptz` (`+ interval '1 day'`, `generate_series`) relies on: a server or
    ///   database set to a zone with daylight saving would move days by an hour (these are forced);
    /// - `statement_timeout` as a session default, so a slow statement fails with SQLSTATE 57014;
    /// - TCP keepalives and a user timeout, so a silently vanished server surfaces as an error.
    mutating func applyDefaults(applicationName: String, statementTimeoutMs: Int?) {
        func setDefault(_ keyword: String, _ value: String) {
            if self[keyword] == nil { self[keyword] = value }
        }
        setDefault("application_name", applicationName)
        setDefault("keepalives_idle", "30")
        setDefault("keepalives_interval", "10")
        setDefault("keepalives_count", "3")
        setDefault("tcp_user_timeout", "60000")
        self["client_encoding"] = "UTF8"
        var serverOptions = ["-c DateStyle=ISO", "-c TimeZone=UTC"]
        if let statementTimeoutMs { serverOptions.append("-c statement_timeout=\(statementTimeoutMs)") }
        // Ours first, so a setting the caller's own `options` repeats wins.
        if let own = self["options"], !own.isEmpty { serverOptions.append(own) }
        self["options"] = serverOptions.joined(separator: " ")
    }

    /// The host name to look up before connecting, or `nil` when libpq will not need a lookup: no host
    /// (Unix socket default), a socket directory, a numeric address, a `hostaddr` already given, or a
    /// multi-host list (left to libpq).
    var hostNeedingLookup: String? {
        guard self["hostaddr"] == nil, let host = self["host"], !host.isEmpty,
              !host.hasPrefix("/"), !host.hasPrefix("@"), !host.contains(",")
        else { return nil }
        var v4 = in_addr()
        var v6 = in6_addr()
        if inet_pton(AF_INET, host, &v4) == 1 || inet_pton(AF_INET6, host, &v6) == 1 { return nil }
        return host
    }

    /// Looks the host name up on libuv's thread pool and passes the addresses as `hostaddr`, since libpq's
    /// own lookup inside `PQconnectStart` would block the loop. The name stays in `host` (for TLS and
    /// .pgpass); libpq tries the addresses in order.
    @Loop mutating func resolveHost() async throws {
        guard let host = hostNeedingLookup else { return }
        let addresses = try await PostgresHostResolver.addresses(of: host)
        self["host"] = Array(repeating: host, count: addresses.count).joined(separator: ",")
        self["hostaddr"] = addresses.joined(separator: ",")
    }

    /// Calls `body` with NULL-terminated keyword and value arrays for `PQconnectStartParams`.
    func withCArrays<T>(_ body: (UnsafePointer<UnsafePointer<CChar>?>, UnsafePointer<UnsafePointer<CChar>?>) -> T) -> T {
        func copy(_ text: String) -> UnsafePointer<CChar>? { strdup(text).map { UnsafePointer($0) } }
        let keywords = parameters.map { copy($0.keyword) } + [nil]
        let values = parameters.map { copy($0.value) } + [nil]
        defer {
            for pointer in keywords + values { free(UnsafeMutablePointer(mutating: pointer)) }
        }
        return keywords.withUnsafeBufferPointer { k in
            values.withUnsafeBufferPointer { v in body(k.baseAddress!, v.baseAddress!) }
        }
    }
}
