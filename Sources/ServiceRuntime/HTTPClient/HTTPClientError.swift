import CCurl

/// Why an HTTP exchange produced no response. The curl code and libcurl's own message are kept for the log.
public struct HTTPClientError: Error, Sendable, CustomStringConvertible {
    /// The class of failure a caller decides on (retry, give up, report).
    public enum Kind: Sendable, Equatable {
        /// The connect or total timeout passed.
        case timeout
        /// No connection: refused, unreachable, or the host name did not resolve.
        case connect
        /// The connection broke mid-exchange: nothing, or only part of a response, came back.
        case connectionDropped
        /// TLS handshake or certificate verification failed.
        case tls
        /// The response body passed the configured size limit.
        case responseTooLarge
        /// The awaiting task was cancelled; the transfer was abandoned.
        case cancelled
        /// Anything else (malformed URL, bad option, out of memory, ...).
        case other
    }

    /// The class of failure, for the caller's retry decision (see `Kind`).
    public let kind: Kind
    /// The `CURLcode` (0 when libcurl did not report the failure, e.g. on cancellation).
    public let curlCode: Int
    /// libcurl's error buffer, or its generic text for the code.
    public let message: String

    /// An error with these values; `curlCode` is 0 when libcurl did not report the failure.
    public init(kind: Kind, curlCode: Int, message: String) {
        self.kind = kind
        self.curlCode = curlCode
        self.message = message
    }

    public var description: String { "\(kind) (curl \(curlCode)): \(message)" }

    /// Classifies a failed transfer's `CURLcode`; `bodyLimitExceeded` tells a write abort caused by the limit.
    static func kind(curlCode code: CURLcode, bodyLimitExceeded: Bool) -> Kind {
        switch code {
        case CURLE_OPERATION_TIMEDOUT:
            return .timeout
        case CURLE_COULDNT_CONNECT, CURLE_COULDNT_RESOLVE_HOST, CURLE_COULDNT_RESOLVE_PROXY:
            return .connect
        case CURLE_GOT_NOTHING, CURLE_RECV_ERROR, CURLE_SEND_ERROR, CURLE_PARTIAL_FILE:
            return .connectionDropped
        case CURLE_SSL_CONNECT_ERROR, CURLE_PEER_FAILED_VERIFICATION, CURLE_SSL_CERTPROBLEM, CURLE_SSL_CIPHER,
             CURLE_SSL_CACERT_BADFILE, CURLE_SSL_ISSUER_ERROR, CURLE_SSL_PINNEDPUBKEYNOTMATCH,
             CURLE_SSL_INVALIDCERTSTATUS, CURLE_SSL_CRL_BADFILE, CURLE_SSL_ENGINE_NOTFOUND,
             CURLE_SSL_ENGINE_SETFAILED, CURLE_SSL_ENGINE_INITFAILED, CURLE_USE_SSL_FAILED:
            return .tls
        case CURLE_FILESIZE_EXCEEDED:
            return .responseTooLarge
        case CURLE_WRITE_ERROR where bodyLimitExceeded:
            return .responseTooLarge
        default:
            return .other
        }
    }
}
