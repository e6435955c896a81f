import CLibUV

// How InkUV handles live and die:
// - the uv_*_t struct is allocated with `UnsafeMutablePointer.allocate`, so libuv can keep its
//   address for as long as it likes;
// - `handle->data` holds a *retained* reference to the Swift object that owns it, so the object
//   (and its callbacks) stays alive while libuv may still call back, even if the caller dropped
//   it; callbacks recover it with `Unmanaged.fromOpaque(data)`;
// - `close()` is idempotent; the close callback calls `didClose()` (free buffers, notify), drops
//   the retain and frees the struct. `EventLoop.closeAll()` walks the loop and closes them all.

/// Implemented by every InkUV handle class.
protocol HandleOwner: AnyObject {
    /// Starts closing; harmless when already closing or closed.
    func close()
    /// Called once from the close callback, before the handle memory is freed.
    func didClose()
}

/// Views any uv handle struct as the uv_handle_t it starts with.
@inline(__always)
func asHandle<T>(_ pointer: UnsafeMutablePointer<T>) -> UnsafeMutablePointer<uv_handle_t> {
    UnsafeMutableRawPointer(pointer).assumingMemoryBound(to: uv_handle_t.self)
}

/// Views any uv stream struct (uv_tcp_t) as the uv_stream_t it starts with.
@inline(__always)
func asStream<T>(_ pointer: UnsafeMutablePointer<T>) -> UnsafeMutablePointer<uv_stream_t> {
    UnsafeMutableRawPointer(pointer).assumingMemoryBound(to: uv_stream_t.self)
}

/// Links an initialised handle to its owner (retained until the close callback).
func attach(_ owner: HandleOwner, to handle: UnsafeMutablePointer<uv_handle_t>) {
    handle.pointee.data = Unmanaged.passRetained(owner as AnyObject).toOpaque()
}

/// The owner of a handle, for callbacks. Nil for handles InkUV did not create or already closed.
@inline(__always)
func owner<T: AnyObject>(_ handle: UnsafeMutablePointer<uv_handle_t>?, as type: T.Type) -> T? {
    guard let data = handle?.pointee.data else { return nil }
    return Unmanaged<T>.fromOpaque(data).takeUnretainedValue()
}

func handleOwner(_ handle: UnsafeMutablePointer<uv_handle_t>) -> HandleOwner? {
    guard let data = handle.pointee.data else { return nil }
    return Unmanaged<AnyObject>.fromOpaque(data).takeUnretainedValue() as? HandleOwner
}

/// Starts closing `handle`, once. The close callback notifies the owner, releases it and frees
/// the handle memory.
func closeHandle(_ handle: UnsafeMutablePointer<uv_handle_t>) {
    if uv_is_closing(handle) != 0 { return }
    uv_close(handle) { handle in
        guard let handle else { return }
        if let data = handle.pointee.data {
            handle.pointee.data = nil
            let retained = Unmanaged<AnyObject>.fromOpaque(data)
            (retained.takeUnretainedValue() as? HandleOwner)?.didClose()
            retained.release()
        }
        UnsafeMutableRawPointer(handle).deallocate()
    }
}

/// Frees a handle whose uv_*_init failed (libuv never saw it).
func discardUninitialised<T>(_ pointer: UnsafeMutablePointer<T>) {
    pointer.deallocate()
}
