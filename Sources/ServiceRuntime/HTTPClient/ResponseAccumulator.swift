/// Collects one response from libcurl's header and body callbacks.
///
/// Pure so its rules are testable: a status line starts a new header block (interim `100 Continue` and
/// similar answers are forgotten), folded lines continue the previous header, and the body stops growing
/// at `bodyLimit` bytes: the transfer then fails, or (`truncates`) goes on with the rest dropped.
struct ResponseAccumulator {
    /// The largest body accepted, in bytes.
    let bodyLimit: Int
    /// Whether a longer body is cut at `bodyLimit` (the rest read and dropped) rather than failing the transfer.
    let truncates: Bool
    /// Header fields of the last response head, in arrival order, values trimmed.
    private(set) var headers: [(String, String)] = []
    private(set) var body: [UInt8] = []
    /// Set when the body outgrew `bodyLimit`; the transfer is then aborted.
    private(set) var bodyLimitExceeded = false

    init(bodyLimit: Int, truncates: Bool = false) {
        self.bodyLimit = bodyLimit
        self.truncates = truncates
    }

    /// Takes one header line as libcurl delivers it, line ending included.
    mutating func receiveHeaderLine(_ raw: some Collection<UInt8>) {
        var line = Array(raw)
        while let last = line.last, last == UInt8(ascii: "\r") || last == UInt8(ascii: "\n") { line.removeLast() }
        guard let first = line.first else { return }
        if line.starts(with: Self.statusPrefix) {
            headers.removeAll()
        } else if first == UInt8(ascii: " ") || first == UInt8(ascii: "\t") {
            guard !headers.isEmpty else { return }
            let continuation = Self.trimmed(line[...])
            headers[headers.count - 1].1 += headers[headers.count - 1].1.isEmpty ? continuation : " " + continuation
        } else if let colon = line.firstIndex(of: UInt8(ascii: ":")) {
            headers.append((Self.trimmed(line[..<colon]), Self.trimmed(line[(colon + 1)...])))
        }
    }

    /// Appends a body chunk; false (and nothing appended) when it would pass `bodyLimit`, unless `truncates`:
    /// then what fits is appended and the chunk counts as taken.
    mutating func receiveBody(_ chunk: UnsafeRawBufferPointer) -> Bool {
        guard body.count + chunk.count <= bodyLimit else {
            if truncates {
                body.append(contentsOf: chunk.prefix(bodyLimit - body.count))
                return true
            }
            bodyLimitExceeded = true
            return false
        }
        body.append(contentsOf: chunk)
        return true
    }

    private static let statusPrefix = Array("HTTP/".utf8)

    private static func trimmed(_ bytes: ArraySlice<UInt8>) -> String {
        var slice = bytes
        while let first = slice.first, first == UInt8(ascii: " ") || first == UInt8(ascii: "\t") { slice.removeFirst() }
        while let last = slice.last, last == UInt8(ascii: " ") || last == UInt8(ascii: "\t") { slice.removeLast() }
        return String(decoding: slice, as: UTF8.self)
    }
}
