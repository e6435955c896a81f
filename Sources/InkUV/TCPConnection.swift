import CLibUV
import Glibc

/// One TCP stream: accepted by a `TCPListener` or opened with `connect`.
///
/// Reads land in a per-connection buffer allocated once and are handed to `onRead` as a borrowed
/// buffer. `write` tries the kernel directly and queues (a copy) only what does not fit, so the
/// caller sees backpressure as the returned queued byte count and gets `onDrain` when it empties.
public final class TCPConnection: HandleOwner {
    /// Size of the reusable read buffer (one read never delivers more).
    public static let readBufferBytes = 64 * 1024
    /// Default bound on bytes waiting in libuv's write queue before `write` refuses with ENOBUFS.
    public static let defaultMaximumQueuedWriteBytes = 8 * 1024 * 1024

    private(set) var handle: UnsafeMutablePointer<uv_tcp_t>?
    private var readBuffer: UnsafeMutableRawBufferPointer?
    private var onRead: ((UnsafeRawBufferPointer) -> Void)?
    private var onEnd: ((UVError?) -> Void)?
    private var onConnect: ((Result<TCPConnection, UVError>) -> Void)?

    /// Failed queued writes (the peer reset, EPIPE); the caller usually closes.
    public var onError: ((UVError) -> Void)?
    /// Called when a queued write completes and nothing is left queued.
    public var onDrain: (() -> Void)?
    /// Called once when the connection has been closed and freed.
    public var onClose: (() -> Void)?
    /// Bound on bytes waiting in the write queue. Past it `write` throws ENOBUFS and writes
    /// nothing, so the stream stays intact; a caller usually treats the peer as too slow.
    public var maximumQueuedWriteBytes = TCPConnection.defaultMaximumQueuedWriteBytes
    public private(set) var isClosing = false

    init(loop: UnsafeMutablePointer<uv_loop_t>) throws(UVError) {
        let handle = UnsafeMutablePointer<uv_tcp_t>.allocate(capacity: 1)
        let rc = uv_tcp_init(loop, handle)
        if rc < 0 {
            discardUninitialised(handle)
            throw UVError(code: rc, operation: "tcp_init")
        }
        self.handle = handle
        attach(self, to: asHandle(handle))
    }

    /// Starts connecting to `address`. `completion` runs once on the loop: `.success` when
    /// connected, `.failure` (ECONNREFUSED, ETIMEDOUT, ECANCELED if closed first) otherwise, in
    /// which case the connection is closed. The returned object can be closed to cancel.
    @discardableResult
    public static func connect(
        loop: EventLoop, to address: SocketAddress, _ completion: @escaping (Result<TCPConnection, UVError>) -> Void
    ) throws(UVError) -> TCPConnection {
        let connection = try TCPConnection(loop: loop.raw)
        let request = UnsafeMutablePointer<uv_connect_t>.allocate(capacity: 1)
        let rc = address.withSockAddr { sockaddr, _ in uv_tcp_connect(request, connection.handle, sockaddr, tcpConnected) }
        if rc < 0 {
            request.deallocate()
            connection.close()
            throw UVError(code: rc, operation: "tcp_connect \(address)")
        }
        connection.onConnect = completion
        connection.connectTarget = address
        return connection
    }
    private var connectTarget: SocketAddress?

    fileprivate func connected(_ status: Int32) {
        let completion = onConnect
        onConnect = nil
        if status < 0 {
            let target = connectTarget.map { " \($0)" } ?? ""
            completion?(.failure(UVError(code: status, operation: "tcp_connect" + target)))
            close()
        } else {
            completion?(.success(self))
        }
    }

    /// Runs `body` with the stream handle; UV_EBADF once closed.
    func withStream(_ body: (UnsafeMutablePointer<uv_stream_t>) -> Int32) -> Int32 {
        guard let handle, !isClosing else { return UVError.badFileDescriptor }
        return body(asStream(handle))
    }

    /// The socket, while open.
    var fileDescriptor: Int32? {
        guard let handle, !isClosing else { return nil }
        var fd: uv_os_fd_t = -1
        guard uv_fileno(asHandle(handle), &fd) == 0 else { return nil }
        return fd
    }

    // MARK: options and addresses

    /// TCP_NODELAY: send small frames at once instead of coalescing them (Nagle).
    public func setNoDelay(_ enabled: Bool) throws(UVError) {
        guard let handle, !isClosing else { throw UVError.closed("tcp_nodelay") }
        try UVError.check(uv_tcp_nodelay(handle, enabled ? 1 : 0), "tcp_nodelay")
    }

    /// SO_KEEPALIVE with the first probe after `delaySeconds` of idleness.
    public func setKeepAlive(_ enabled: Bool, delaySeconds: UInt32 = 60) throws(UVError) {
        guard let handle, !isClosing else { throw UVError.closed("tcp_keepalive") }
        try UVError.check(uv_tcp_keepalive(handle, enabled ? 1 : 0, delaySeconds), "tcp_keepalive")
    }

    /// TCP_RTO_MAX_MS: caps the retransmission timeout's exponential backoff (the kernel's is
    /// 120 s). Throws `UVError.optionUnsupported` on kernels older than Linux 6.15.
    public func setRetransmitCeiling(milliseconds: UInt32) throws(UVError) {
        guard let handle, !isClosing else { throw UVError.closed("tcp_rto_max") }
        try InkUV.setRetransmitCeiling(handle, milliseconds: milliseconds, "tcp_rto_max")
    }

    /// The socket's retransmission-timeout ceiling in ms; nil when the kernel has no such option.
    public var retransmitCeilingMilliseconds: UInt32? { handle.flatMap(retransmitCeiling) }

    public var localAddress: SocketAddress? { handle.flatMap { tcpAddress($0, uv_tcp_getsockname) } }
    public var remoteAddress: SocketAddress? { handle.flatMap { tcpAddress($0, uv_tcp_getpeername) } }

    // MARK: read

    /// Starts reading. `onRead` gets each chunk (borrowed: copy what you keep); `onEnd` runs once
    /// with nil on a clean end of stream (the peer shut down its side) or the error otherwise.
    /// Reading stops after `onEnd`; the connection stays open until `close()`.
    public func startReading(
        _ onRead: @escaping (UnsafeRawBufferPointer) -> Void, onEnd: @escaping (UVError?) -> Void
    ) throws(UVError) {
        guard let handle, !isClosing else { throw UVError.closed("tcp_read_start") }
        if readBuffer == nil {
            readBuffer = .allocate(byteCount: TCPConnection.readBufferBytes, alignment: 16)
        }
        self.onRead = onRead
        self.onEnd = onEnd
        try UVError.check(uv_read_start(asStream(handle), tcpAllocate, tcpRead), "tcp_read_start")
    }

    /// Stops reading (bytes wait in the kernel, which pushes back on the sender).
    public func stopReading() {
        guard let handle, !isClosing else { return }
        uv_read_stop(asStream(handle))
    }

    fileprivate func provideBuffer(_ buffer: UnsafeMutablePointer<uv_buf_t>) {
        guard let readBuffer, !isClosing else {
            buffer.pointee = uv_buf_init(nil, 0)
            return
        }
        buffer.pointee = uv_buf_init(readBuffer.baseAddress!.assumingMemoryBound(to: CChar.self), UInt32(readBuffer.count))
    }

    fileprivate func read(_ count: Int, _ buffer: UnsafePointer<uv_buf_t>?) {
        guard !isClosing else { return }
        if count > 0, let buffer {
            onRead?(UnsafeRawBufferPointer(start: buffer.pointee.base, count: count))
        } else if count < 0 {
            let onEnd = self.onEnd
            self.onEnd = nil
            onRead = nil
            if let handle { uv_read_stop(asStream(handle)) }
            onEnd?(count == Int(UVError.endOfFile) ? nil : UVError(code: Int32(count), operation: "tcp_read"))
        }
    }

    // MARK: write

    /// Bytes accepted by `write` but not yet handed to the kernel.
    public var writeQueueBytes: Int {
        guard let handle else { return 0 }
        return uv_stream_get_write_queue_size(asStream(handle))
    }

    /// Writes `bytes` in order after earlier writes. Returns the bytes now waiting in the write
    /// queue (0: everything reached the kernel). Throws ENOBUFS (nothing written) when the queue
    /// is non-empty and would pass `maximumQueuedWriteBytes`, or the kernel's error.
    @discardableResult
    public func write(_ bytes: UnsafeRawBufferPointer) throws(UVError) -> Int {
        guard let handle, !isClosing else { throw UVError.closed("tcp_write") }
        guard let base = bytes.baseAddress, bytes.count > 0 else { return writeQueueBytes }
        let stream = asStream(handle)
        let queued = uv_stream_get_write_queue_size(stream)
        var written = 0
        if queued == 0 {
            // Nothing queued: the kernel may take it all without a copy.
            var buffer = uv_buf_init(UnsafeMutablePointer(mutating: base.assumingMemoryBound(to: CChar.self)), UInt32(bytes.count))
            let rc = uv_try_write(stream, &buffer, 1)
            if rc >= 0 {
                written = Int(rc)
                if written == bytes.count { return 0 }
            } else if rc != UVError.wouldBlock {
                throw UVError(code: rc, operation: "tcp_write")
            }
        } else if queued + bytes.count > maximumQueuedWriteBytes {
            throw UVError(code: UVError.noBufferSpace, operation: "tcp_write")
        }
        let rest = bytes.count - written
        let header = TCPConnection.requestHeaderBytes
        let block = UnsafeMutableRawPointer.allocate(byteCount: header + rest, alignment: 16)
        let request = block.bindMemory(to: uv_write_t.self, capacity: 1)
        let payload = block + header
        payload.copyMemory(from: base + written, byteCount: rest)
        var buffer = uv_buf_init(payload.assumingMemoryBound(to: CChar.self), UInt32(rest))
        let rc = uv_write(request, stream, &buffer, 1, tcpWritten)
        if rc < 0 {
            block.deallocate()
            throw UVError(code: rc, operation: "tcp_write")
        }
        return uv_stream_get_write_queue_size(stream)
    }

    /// Writes an array (see `write(_:)` for an unsafe buffer).
    @discardableResult
    public func write(_ bytes: [UInt8]) throws(UVError) -> Int {
        let result = bytes.withUnsafeBytes { raw in Result { () throws(UVError) -> Int in try write(raw) } }
        return try result.get()
    }

    /// Payload offset inside a queued-write block (request size rounded up to 16).
    static let requestHeaderBytes = (MemoryLayout<uv_write_t>.size + 15) & ~15

    fileprivate func writeCompleted(_ status: Int32) {
        if status < 0 {
            if status != UVError.cancelled { onError?(UVError(code: status, operation: "tcp_write")) }
            return
        }
        if !isClosing && writeQueueBytes == 0 { onDrain?() }
    }

    // MARK: shutdown and close

    /// Sends FIN after every queued write; `completion` runs when done (or with the error).
    public func shutdown(_ completion: ((UVError?) -> Void)? = nil) {
        guard let handle, !isClosing else {
            completion?(UVError.closed("tcp_shutdown"))
            return
        }
        let request = UnsafeMutablePointer<uv_shutdown_t>.allocate(capacity: 1)
        let rc = uv_shutdown(request, asStream(handle), tcpShutDown)
        if rc < 0 {
            request.deallocate()
            completion?(UVError(code: rc, operation: "tcp_shutdown"))
            return
        }
        onShutdown = completion
    }
    private var onShutdown: ((UVError?) -> Void)?

    fileprivate func shutDown(_ status: Int32) {
        let completion = onShutdown
        onShutdown = nil
        completion?(status < 0 ? UVError(code: status, operation: "tcp_shutdown") : nil)
    }

    /// Closes the connection; queued writes are dropped. Idempotent, safe inside callbacks.
    public func close() {
        guard let handle, !isClosing else { return }
        isClosing = true
        closeHandle(asHandle(handle))
    }

    func didClose() {
        handle = nil
        readBuffer?.deallocate()
        readBuffer = nil
        onRead = nil
        onEnd = nil
        onConnect = nil
        onDrain = nil
        onError = nil
        onShutdown = nil
        let onClose = self.onClose
        self.onClose = nil
        onClose?()
    }
}

/// getsockname/getpeername of a TCP handle as a `SocketAddress`.
func tcpAddress(
    _ handle: UnsafeMutablePointer<uv_tcp_t>,
    _ call: (UnsafePointer<uv_tcp_t>?, UnsafeMutablePointer<sockaddr>?, UnsafeMutablePointer<Int32>?) -> Int32
) -> SocketAddress? {
    var storage = sockaddr_storage()
    var length = Int32(MemoryLayout<sockaddr_storage>.size)
    return withUnsafeMutablePointer(to: &storage) { pointer in
        pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { address in
            call(handle, address, &length) == 0 ? SocketAddress(address) : nil
        }
    }
}

private func tcpConnected(_ request: UnsafeMutablePointer<uv_connect_t>?, _ status: Int32) {
    guard let request else { return }
    let stream = request.pointee.handle
    request.deallocate()
    if let stream, let connection = owner(asHandle(stream), as: TCPConnection.self) {
        connection.connected(status)
    }
}

private func tcpAllocate(_ handle: UnsafeMutablePointer<uv_handle_t>?, _ suggested: Int, _ buffer: UnsafeMutablePointer<uv_buf_t>?) {
    guard let buffer else { return }
    guard let connection = owner(handle, as: TCPConnection.self) else {
        buffer.pointee = uv_buf_init(nil, 0)
        return
    }
    connection.provideBuffer(buffer)
}

private func tcpRead(_ stream: UnsafeMutablePointer<uv_stream_t>?, _ count: Int, _ buffer: UnsafePointer<uv_buf_t>?) {
    guard let stream, let connection = owner(asHandle(stream), as: TCPConnection.self) else { return }
    connection.read(count, buffer)
}

private func tcpWritten(_ request: UnsafeMutablePointer<uv_write_t>?, _ status: Int32) {
    guard let request else { return }
    let stream = request.pointee.handle
    // The request and its payload copy were one allocation.
    UnsafeMutableRawPointer(request).deallocate()
    if let stream, let connection = owner(asHandle(stream), as: TCPConnection.self) {
        connection.writeCompleted(status)
    }
}

private func tcpShutDown(_ request: UnsafeMutablePointer<uv_shutdown_t>?, _ status: Int32) {
    guard let request else { return }
    let stream = request.pointee.handle
    request.deallocate()
    if let stream, let connection = owner(asHandle(stream), as: TCPConnection.self) {
        connection.shutDown(status)
    }
}
