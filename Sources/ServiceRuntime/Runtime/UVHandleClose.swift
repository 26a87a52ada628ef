import CUV

/// The close callbacks shared by uv handles whose only clean-up is memory: `free` deallocates the handle,
/// `releaseAndFree` first drops the retained object its `data` holds (`Unmanaged.passRetained` at init).
///
/// Declared outside any actor, so libuv's calls cost no executor query.
enum UVHandleClose {
    /// Deallocates the handle.
    static let free: uv_close_cb = { handle in
        handle?.deallocate()
    }

    /// Releases the object retained in the handle's `data`, then deallocates the handle.
    static let releaseAndFree: uv_close_cb = { handle in
        guard let handle else { return }
        Unmanaged<AnyObject>.fromOpaque(handle.pointee.data).release()
        handle.deallocate()
    }
}
