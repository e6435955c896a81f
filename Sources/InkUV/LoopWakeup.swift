import CLibUV
import Glibc

/// Wakes the loop from another thread (uv_async): `wake()` may be called from any thread, and
/// `callback` then runs on the loop thread. Several wakes before the loop gets to it coalesce
/// into one callback, so the callback should drain whatever work is pending (e.g. the store's
/// `pollDurable()` after its writer thread committed).
///
/// `wake()` after `close()` does nothing: a lock keeps a late wake from touching a handle
/// that is being freed.
public final class LoopWakeup: HandleOwner, @unchecked Sendable {
    private var handle: UnsafeMutablePointer<uv_async_t>?
    private let lock: UnsafeMutablePointer<pthread_mutex_t>
    private var closedForWakes = false
    private var callback: (() -> Void)?
    public private(set) var isClosing = false
    /// Called once (on the loop thread) when the handle has been closed and freed.
    public var onClose: (() -> Void)?

    public init(loop: EventLoop, _ callback: @escaping () -> Void) throws(UVError) {
        lock = .allocate(capacity: 1)
        pthread_mutex_init(lock, nil)
        let handle = UnsafeMutablePointer<uv_async_t>.allocate(capacity: 1)
        let rc = uv_async_init(loop.raw, handle, asyncWoken)
        if rc < 0 {
            discardUninitialised(handle)
            pthread_mutex_destroy(lock)
            lock.deallocate()
            throw UVError(code: rc, operation: "async_init")
        }
        self.callback = callback
        self.handle = handle
        attach(self, to: asHandle(handle))
    }

    deinit {
        pthread_mutex_destroy(lock)
        lock.deallocate()
    }

    /// Asks the loop to run the callback soon. Thread-safe; cheap when already pending.
    public func wake() {
        pthread_mutex_lock(lock)
        if !closedForWakes, let handle { uv_async_send(handle) }
        pthread_mutex_unlock(lock)
    }

    /// Closes the handle (loop thread only). Idempotent.
    public func close() {
        guard let handle, !isClosing else { return }
        isClosing = true
        pthread_mutex_lock(lock)
        closedForWakes = true
        pthread_mutex_unlock(lock)
        closeHandle(asHandle(handle))
    }

    func didClose() {
        pthread_mutex_lock(lock)
        handle = nil
        pthread_mutex_unlock(lock)
        callback = nil
        let onClose = self.onClose
        self.onClose = nil
        onClose?()
    }

    fileprivate func woken() {
        guard !isClosing, let callback else { return }
        callback()
    }
}

private func asyncWoken(_ handle: UnsafeMutablePointer<uv_async_t>?) {
    guard let handle, let wakeup = owner(asHandle(handle), as: LoopWakeup.self) else { return }
    wakeup.woken()
}
