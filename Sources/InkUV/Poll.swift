import CLibUV

/// Readiness of an arbitrary file descriptor (a socket owned by another library, such as
/// libmosquitto's). The descriptor stays owned by the caller: closing the poll does not close it,
/// but the poll must be closed before the descriptor is.
public final class Poll: HandleOwner {
    /// Which readiness to wait for / which arrived.
    public struct Events: OptionSet, Hashable, Sendable {
        public let rawValue: Int32
        public init(rawValue: Int32) { self.rawValue = rawValue }
        public static let readable = Events(rawValue: Int32(UV_READABLE.rawValue))
        public static let writable = Events(rawValue: Int32(UV_WRITABLE.rawValue))
        public static let disconnect = Events(rawValue: Int32(UV_DISCONNECT.rawValue))
    }

    private var handle: UnsafeMutablePointer<uv_poll_t>?
    private var callback: ((Events, UVError?) -> Void)?
    public let fd: Int32
    public private(set) var isClosing = false
    /// Called once when the poll has been closed and freed.
    public var onClose: (() -> Void)?

    /// Watches `fd` (libuv makes it non-blocking).
    public init(loop: EventLoop, fd: Int32) throws(UVError) {
        self.fd = fd
        let handle = UnsafeMutablePointer<uv_poll_t>.allocate(capacity: 1)
        let rc = uv_poll_init(loop.raw, handle, fd)
        if rc < 0 {
            discardUninitialised(handle)
            throw UVError(code: rc, operation: "poll_init fd \(fd)")
        }
        self.handle = handle
        attach(self, to: asHandle(handle))
    }

    /// Calls `callback(events, nil)` whenever `fd` is ready for any of `events`, or
    /// `callback([], error)` on a poll error. Calling it again changes the events.
    public func start(_ events: Events, _ callback: @escaping (Events, UVError?) -> Void) throws(UVError) {
        guard let handle, !isClosing else { throw UVError.closed("poll_start") }
        self.callback = callback
        try UVError.check(uv_poll_start(handle, events.rawValue, pollReady), "poll_start fd \(fd)")
    }

    public func stop() {
        guard let handle, !isClosing else { return }
        uv_poll_stop(handle)
    }

    /// Closes the poll (not the descriptor). Idempotent, safe inside its own callback.
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

    fileprivate func ready(_ status: Int32, _ events: Int32) {
        guard !isClosing, let callback else { return }
        if status < 0 {
            callback([], UVError(code: status, operation: "poll fd \(fd)"))
        } else {
            callback(Events(rawValue: events), nil)
        }
    }
}

private func pollReady(_ handle: UnsafeMutablePointer<uv_poll_t>?, _ status: Int32, _ events: Int32) {
    guard let handle, let poll = owner(asHandle(handle), as: Poll.self) else { return }
    poll.ready(status, events)
}
