import CLibUV
import Glibc

/// Watches one POSIX signal (SIGINT, SIGTERM, SIGHUP...) and calls back on the loop thread.
/// While any watcher for a signal exists, libuv owns its disposition; closing the last one
/// restores the default.
public final class Signal: HandleOwner {
    public static let interrupt = SIGINT
    public static let terminate = SIGTERM
    public static let hangUp = SIGHUP

    private var handle: UnsafeMutablePointer<uv_signal_t>?
    private var callback: ((Int32) -> Void)?
    public private(set) var isClosing = false
    /// Called once when the watcher has been closed and freed.
    public var onClose: (() -> Void)?

    public init(loop: EventLoop) throws(UVError) {
        let handle = UnsafeMutablePointer<uv_signal_t>.allocate(capacity: 1)
        let rc = uv_signal_init(loop.raw, handle)
        if rc < 0 {
            discardUninitialised(handle)
            throw UVError(code: rc, operation: "signal_init")
        }
        self.handle = handle
        attach(self, to: asHandle(handle))
    }

    /// Calls `callback(signum)` each time `signum` arrives, until `stop()` or `close()`.
    public func start(_ signum: Int32, _ callback: @escaping (Int32) -> Void) throws(UVError) {
        guard let handle, !isClosing else { throw UVError.closed("signal_start") }
        self.callback = callback
        try UVError.check(uv_signal_start(handle, signalArrived, signum), "signal_start \(signum)")
    }

    public func stop() {
        guard let handle, !isClosing else { return }
        uv_signal_stop(handle)
    }

    /// Closes the watcher. Idempotent, safe inside its own callback.
    public func close() {
        guard let handle, !isClosing else { return }
        isClosing = true
        closeHandle(asHandle(handle))
    }

    func didClose() {
        handle = nil
        callback = nil
        let onClose = self.onClose
        self.onClose = nil
        onClose?()
    }

    fileprivate func arrived(_ signum: Int32) {
        guard !isClosing, let callback else { return }
        callback(signum)
    }
}

private func signalArrived(_ handle: UnsafeMutablePointer<uv_signal_t>?, _ signum: Int32) {
    guard let handle, let watcher = owner(asHandle(handle), as: Signal.self) else { return }
    watcher.arrived(signum)
}
