import CUV
import Foundation

/// Host name lookup with `uv_getaddrinfo`, which runs `getaddrinfo` on libuv's thread pool so the loop never
/// waits for DNS.
@Loop
enum PostgresHostResolver {
    /// The request's Swift side, owned by the request from submission until libuv's callback.
    private final class Lookup {
        let host: String
        let continuation: CheckedContinuation<[String], Error>
        init(host: String, continuation: CheckedContinuation<[String], Error>) {
            self.host = host
            self.continuation = continuation
        }
    }

    /// The distinct TCP addresses of `host`, in the resolver's order, as numeric strings.
    static func addresses(of host: String) async throws -> [String] {
        try await withCheckedThrowingContinuation { continuation in
            let request = UnsafeMutablePointer<uv_getaddrinfo_t>.allocate(capacity: 1)
            request.pointee.data = Unmanaged.passRetained(Lookup(host: host, continuation: continuation)).toOpaque()
            var hints = addrinfo()
            hints.ai_family = AF_UNSPEC
            hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
            let status = uv_getaddrinfo(EventLoop.shared.uv, request, { request, status, list in
                guard let request else { return }
                let lookup = Unmanaged<Lookup>.fromOpaque(request.pointee.data).takeRetainedValue()
                defer {
                    uv_freeaddrinfo(list)
                    request.deallocate()
                }
                let addresses = status == 0 ? PostgresHostResolver.numericAddresses(list) : []
                if addresses.isEmpty {
                    let reason = status == 0 ? "no addresses" : String(cString: uv_strerror(status))
                    lookup.continuation.resume(throwing: PostgresError(
                        kind: .connection, message: "could not resolve host name \"\(lookup.host)\": \(reason)"))
                } else {
                    lookup.continuation.resume(returning: addresses)
                }
            }, host, nil, &hints)
            if status != 0 {
                let lookup = Unmanaged<Lookup>.fromOpaque(request.pointee.data).takeRetainedValue()
                request.deallocate()
                lookup.continuation.resume(throwing: PostgresError(
                    kind: .connection, message: "could not resolve host name \"\(host)\": \(String(cString: uv_strerror(status)))"))
            }
        }
    }

    private nonisolated static func numericAddresses(_ list: UnsafeMutablePointer<addrinfo>?) -> [String] {
        func text(_ family: Int32, _ address: UnsafeRawPointer) -> String? {
            var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
            return buffer.withUnsafeMutableBufferPointer { out in
                inet_ntop(family, address, out.baseAddress, socklen_t(out.count)).map { String(cString: $0) }
            }
        }
        var addresses: [String] = []
        var entry = list
        while let info = entry?.pointee {
            entry = info.ai_next
            let address: String? = switch info.ai_family {
            case AF_INET:
                info.ai_addr.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { socket in
                    withUnsafePointer(to: socket.pointee.sin_addr) { text(AF_INET, $0) }
                }
            case AF_INET6:
                info.ai_addr.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { socket in
                    withUnsafePointer(to: socket.pointee.sin6_addr) { text(AF_INET6, $0) }
                }
            default:
                nil
            }
            if let address, !addresses.contains(address) { addresses.append(address) }
        }
        return addresses
    }
}
