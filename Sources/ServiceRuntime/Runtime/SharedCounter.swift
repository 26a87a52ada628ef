import CUV
import Foundation

/// A 64-bit counter that a process and the copies of itself it starts read and bump atomically: two words in
/// memory mapped from a memfd whose descriptor the copies inherit (`descriptor`, handed down by number), or in
/// this process's own memory. The first word is an id drawn when the counter is made, so that the counters of
/// unrelated groups of processes are told apart when their values meet (in a message both can see).
public final class SharedCounter: @unchecked Sendable {
    /// Drawn at random when the counter was made; the same in every process that maps it.
    public let id: UInt64
    /// The memfd the counter lives in, for copies to inherit (close-on-exec is set: clear it while starting
    /// them); nil for a counter in this process's own memory.
    public let descriptor: Int32?
    private let words: UnsafeMutablePointer<UInt64>

    private static let length = 4_096

    /// A counter at 0 in this process's own memory: nothing can inherit it.
    public init() {
        words = .allocate(capacity: 2)
        words.initialize(repeating: 0, count: 2)
        words[0] = UInt64.random(in: 1...UInt64.max)
        id = words[0]
        descriptor = nil
    }

    /// A counter at 0 in a new memfd, for copies of this process to inherit through `descriptor`.
    public static func shared() throws -> SharedCounter {
        let descriptor = cuv_memfd_create("entitlement-service-counter")
        guard descriptor >= 0 else { throw SharedCounterError(call: "memfd_create") }
        guard ftruncate(descriptor, off_t(length)) == 0 else {
            let error = SharedCounterError(call: "ftruncate")
            close(descriptor)
            throw error
        }
        do {
            return try SharedCounter(mapping: descriptor, drawingID: true)
        } catch {
            close(descriptor)
            throw error
        }
    }

    /// The counter a first process made, by the descriptor this copy inherited; it must be a memfd of the right size.
    public convenience init(inheriting descriptor: Int32) throws {
        var status = stat()
        guard fstat(descriptor, &status) == 0, status.st_size == off_t(Self.length) else {
            throw SharedCounterError(call: "fstat", detail: "descriptor \(descriptor) is not a shared counter")
        }
        try self.init(mapping: descriptor, drawingID: false)
        guard id != 0 else { throw SharedCounterError(call: "mmap", detail: "descriptor \(descriptor) holds no counter id") }
    }

    /// Maps the counter in `descriptor`; a new one (`drawingID`, before any copy can see it) gets its id.
    private init(mapping descriptor: Int32, drawingID: Bool) throws {
        guard let memory = mmap(nil, Self.length, PROT_READ | PROT_WRITE, MAP_SHARED, descriptor, 0), memory != MAP_FAILED else {
            throw SharedCounterError(call: "mmap")
        }
        words = memory.bindMemory(to: UInt64.self, capacity: 2)
        if drawingID { words[0] = UInt64.random(in: 1...UInt64.max) }
        id = cuv_atomic_load(words)
        self.descriptor = descriptor
    }

    deinit {
        if descriptor == nil { words.deallocate() } else { munmap(words, Self.length) }
    }

    /// The current value.
    public var value: UInt64 { UInt64(cuv_atomic_load(words + 1)) }

    /// Adds 1 and returns the new value; concurrent increments from any process each get their own.
    @discardableResult
    public func increment() -> UInt64 { UInt64(cuv_atomic_increment(words + 1)) }
}

/// A shared counter that could not be made or mapped.
public struct SharedCounterError: Error, CustomStringConvertible {
    public var description: String

    init(call: String, detail: String? = nil) {
        description = "shared counter: \(call) failed: \(detail ?? String(cString: strerror(errno)))"
    }
}
