import CUV

extension Array where Element == UInt8 {
    /// Asks the CPU to start loading these bytes into its caches, without waiting for them. For bytes that will
    /// be read a little later and are likely out of the caches (an answer held for one of many users, which the
    /// write will copy once the rest of the request is done): their memory is fetched meanwhile.
    public func prefetch() {
        withUnsafeBytes { cuv_prefetch($0.baseAddress, $0.count) }
    }
}
