import CUV
import Foundation

/// Why the server could not start listening.
public struct HTTPServerError: Error, CustomStringConvertible, Sendable {
    public var description: String
}

/// Creates the listening socket by hand (socket, options, bind), so a process can bind before it is ready to
/// serve and hand the descriptor to copies of itself; libuv adopts it with `uv_tcp_open`. Without
/// SO_REUSEPORT: a port in use fails with EADDRINUSE.
public enum ListeningSocket {
    /// Whether `host` is an IPv4 or IPv6 literal, as `bind(host:port:)` takes it.
    public static func isAddressLiteral(_ host: String) -> Bool {
        socketAddress(host: host, port: 0) != nil
    }

    /// The socket address of `host` (an IPv4 or IPv6 literal) and `port`, its length and family; nil for anything else.
    private static func socketAddress(host: String, port: Int) -> (sockaddr_storage, socklen_t, Int32)? {
        var address = sockaddr_storage()
        if withUnsafeMutableBytes(of: &address, { uv_ip4_addr(host, Int32(port), $0.baseAddress!.assumingMemoryBound(to: sockaddr_in.self)) }) == 0 {
            return (address, socklen_t(MemoryLayout<sockaddr_in>.size), AF_INET)
        }
        if withUnsafeMutableBytes(of: &address, { uv_ip6_addr(host, Int32(port), $0.baseAddress!.assumingMemoryBound(to: sockaddr_in6.self)) }) == 0 {
            return (address, socklen_t(MemoryLayout<sockaddr_in6>.size), AF_INET6)
        }
        return nil
    }

    /// A bound, non-blocking TCP socket for `host` (an IPv4 or IPv6 literal) and `port` (0 picks a free one).
    public static func bind(host: String, port: Int) throws -> Int32 {
        guard (0...65535).contains(port) else { throw HTTPServerError(description: "port \(port) is out of range") }
        guard var (address, length, family) = socketAddress(host: host, port: port) else {
            throw HTTPServerError(description: "listen address \(host) is not an IPv4 or IPv6 literal")
        }
        let fd = socket(family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw failure("socket", host, port) }
        guard cuv_setsockopt_int(fd, SOL_SOCKET, SO_REUSEADDR, 1) == 0 else {
            let error = failure("setsockopt", host, port)
            close(fd)
            throw error
        }
        let bound = withUnsafeBytes(of: &address) { Glibc.bind(fd, $0.baseAddress!.assumingMemoryBound(to: sockaddr.self), length) }
        guard bound == 0 else {
            let error = failure("bind", host, port)
            close(fd)
            throw error
        }
        return fd
    }

    /// Whether `fd` is a TCP socket that listens (`SO_ACCEPTCONN`), such as one inherited from a parent process.
    public static func isListening(_ fd: Int32) -> Bool {
        var value: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        return getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &value, &length) == 0 && value == 1
    }

    /// The local port of a bound uv TCP handle.
    static func localPort(_ handle: UnsafeMutablePointer<uv_tcp_t>) -> Int? {
        var address = sockaddr_storage()
        var length = Int32(MemoryLayout<sockaddr_storage>.size)
        let status = withUnsafeMutableBytes(of: &address) {
            uv_tcp_getsockname(handle, $0.baseAddress!.assumingMemoryBound(to: sockaddr.self), &length)
        }
        guard status == 0 else { return nil }
        return withUnsafeBytes(of: &address) { raw in
            // sin_port and sin6_port sit at the same offset, in network byte order.
            Int(UInt16(bigEndian: raw.loadUnaligned(fromByteOffset: MemoryLayout<sa_family_t>.size, as: UInt16.self)))
        }
    }

    /// The peer of an accepted uv TCP handle as `address:port` (`[address]:port` for IPv6); nil when the
    /// socket has no peer any more.
    static func peerAddress(_ handle: UnsafeMutablePointer<uv_tcp_t>) -> String? {
        var address = sockaddr_storage()
        var length = Int32(MemoryLayout<sockaddr_storage>.size)
        var name = [CChar](repeating: 0, count: 64)
        let status = withUnsafeMutableBytes(of: &address) { raw -> Int32 in
            let socket = raw.baseAddress!.assumingMemoryBound(to: sockaddr.self)
            guard uv_tcp_getpeername(handle, socket, &length) == 0 else { return -1 }
            return uv_ip_name(socket, &name, name.count)
        }
        guard status == 0 else { return nil }
        let family = Int32(address.ss_family)
        let port = withUnsafeBytes(of: &address) { raw in
            Int(UInt16(bigEndian: raw.loadUnaligned(fromByteOffset: MemoryLayout<sa_family_t>.size, as: UInt16.self)))
        }
        let host = String(decoding: name.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return family == AF_INET6 ? "[\(host)]:\(port)" : "\(host):\(port)"
    }

    private static func failure(_ call: String, _ host: String, _ port: Int) -> HTTPServerError {
        HTTPServerError(description: "\(call) for \(host):\(port) failed: \(String(cString: strerror(errno)))")
    }
}
