import CLibUV
import Glibc

/// A UDP socket on an `EventLoop`, built for many small datagrams:
/// - receive uses recvmmsg (`UV_UDP_RECVMMSG`) into one slab allocated once per socket, and hands
///   each datagram to `onDatagram` as a borrowed buffer plus the sender: no heap work per datagram;
/// - send tries `uv_udp_try_send` first; only when the kernel queue is full (or earlier sends are
///   still queued, to keep order) does it copy the datagram into a queued request, freed in its
///   callback. Queued bytes are bounded by `maximumQueuedSendBytes`;
/// - after `startBatchingSends()`, `send` copies the datagram into a batch instead, and the batch
///   leaves with sendmmsg(2), one system call for many datagrams, at the end of the loop
///   iteration's IO callbacks or just before the loop next waits (so nothing waits longer than
///   the iteration that sent it), or at once when full. What the kernel does not take (a full
///   send buffer) goes on through the queued path, in order.
public final class UDPSocket: HandleOwner {
    /// libuv hands recvmmsg one 64 KiB slice of the receive buffer per datagram.
    public static let receiveSliceBytes = 64 * 1024
    /// libuv 1.44 reads at most 20 datagrams per recvmmsg call; more slices would go unused.
    public static let maximumReceiveBatch = 20
    /// Default bound on bytes waiting in queued sends before `send` refuses with ENOBUFS.
    public static let defaultMaximumQueuedSendBytes = 4 * 1024 * 1024
    /// Largest payload `send` accepts (the IPv4 UDP maximum; the kernel refuses more anyway).
    public static let maximumDatagramBytes = 65_507
    /// Most datagrams a batching socket holds: one sendmmsg(2) call's worth (a fan-out to a
    /// 40-member room and its acks fit); a full batch is flushed before the next is added.
    public static let sendBatchDatagrams = 64
    /// Most payload bytes a batching socket holds (at least one largest datagram); a datagram
    /// that does not fit flushes the batch first.
    public static let sendBatchBytes = 128 * 1024

    private var handle: UnsafeMutablePointer<uv_udp_t>?
    private var slab: UnsafeMutableRawBufferPointer?
    private let batch: Int
    /// Whether the socket is AF_INET6 (IPv4 destinations are then sent as mapped addresses).
    private var isIPv6 = false
    private var onDatagram: ((UnsafeRawBufferPointer, SocketAddress) -> Void)?
    /// Batched sends (nil until `startBatchingSends()`), flushed by the two loop hooks.
    private var sendBatch: UDPSendBatch?
    private var flushHooks: [LoopPhaseHook] = []
    private var isFlushing = false

    /// Receive errors (from the kernel) and failed queued sends; the socket stays open.
    public var onError: ((UVError) -> Void)?
    /// Batching only: each batched datagram a flush could not send (the kernel refused it, or
    /// the queued path's bound was reached), after the flush. Nil: reported to `onError`.
    public var onSendError: ((UVError) -> Void)?
    /// Batching only: after each flush, the datagrams and payload bytes it handed over (to the
    /// kernel, or behind a full send buffer to the queued path); refused ones are not included.
    public var onSendsFlushed: ((_ datagrams: Int, _ bytes: Int) -> Void)?
    /// Called once when the socket has been closed and freed.
    public var onClose: (() -> Void)?
    /// Bound on bytes held by queued sends; `send` throws ENOBUFS past it (the datagram is dropped).
    public var maximumQueuedSendBytes = UDPSocket.defaultMaximumQueuedSendBytes

    /// Counters for metrics.
    public private(set) var datagramsReceived: UInt64 = 0
    public private(set) var datagramsSent: UInt64 = 0
    /// Payload bytes of `datagramsSent`.
    public private(set) var bytesSent: UInt64 = 0
    /// sendmmsg(2) calls that sent datagrams (batching only).
    public private(set) var sendBatches: UInt64 = 0
    /// Sends that had to be queued because the kernel buffer was full.
    public private(set) var sendsQueued: UInt64 = 0
    /// recvmmsg calls that returned datagrams (datagramsReceived / receiveBatches = batch fill).
    public private(set) var receiveBatches: UInt64 = 0
    /// Datagrams dropped because they did not fit a receive slice (MSG_TRUNC).
    public private(set) var datagramsTruncated: UInt64 = 0

    /// Binds a new socket. Port 0 picks a free port (see `localAddress`). `ipv6Only` false lets an
    /// `[::]` socket take IPv4 peers too (as `::ffff:a.b.c.d`). `batch` is the most datagrams
    /// read per system call (1 ... `maximumReceiveBatch`).
    public convenience init(
        loop: EventLoop, bindTo address: SocketAddress, reuseAddress: Bool = false, ipv6Only: Bool = false,
        batch: Int = UDPSocket.maximumReceiveBatch
    ) throws(UVError) {
        let domain = address.family == .ipv4 ? AF_INET : AF_INET6
        try self.init(loop: loop, domain: UInt32(domain), batch: batch)
        isIPv6 = address.family == .ipv6
        var flags: UInt32 = 0
        if reuseAddress { flags |= UV_UDP_REUSEADDR.rawValue }
        if ipv6Only && address.family == .ipv6 { flags |= UV_UDP_IPV6ONLY.rawValue }
        let rc = address.withSockAddr { sockaddr, _ in uv_udp_bind(handle, sockaddr, flags) }
        if rc < 0 {
            close()
            throw UVError(code: rc, operation: "udp_bind \(address)")
        }
    }

    /// Adopts an already bound datagram socket (systemd socket activation). The socket becomes
    /// owned by this object and is closed with it.
    public convenience init(loop: EventLoop, adopting fd: Int32, batch: Int = UDPSocket.maximumReceiveBatch) throws(UVError) {
        try self.init(loop: loop, domain: UInt32(AF_UNSPEC), batch: batch)
        let rc = uv_udp_open(handle, fd)
        if rc < 0 {
            close()
            throw UVError(code: rc, operation: "udp_open fd \(fd)")
        }
        isIPv6 = (try? localAddress)?.family == .ipv6
    }

    private init(loop: EventLoop, domain: UInt32, batch: Int) throws(UVError) {
        self.batch = min(max(batch, 1), UDPSocket.maximumReceiveBatch)
        let handle = UnsafeMutablePointer<uv_udp_t>.allocate(capacity: 1)
        let rc = uv_udp_init_ex(loop.raw, handle, domain | UInt32(UV_UDP_RECVMMSG.rawValue))
        if rc < 0 {
            discardUninitialised(handle)
            throw UVError(code: rc, operation: "udp_init")
        }
        self.handle = handle
        attach(self, to: asHandle(handle))
    }

    /// Whether `close()` has been called (the handle may still be finishing its close).
    public private(set) var isClosing = false

    /// The bound address (with the port the kernel picked for port 0).
    public var localAddress: SocketAddress {
        get throws(UVError) {
            guard let handle else { throw UVError.closed("udp_getsockname") }
            var storage = sockaddr_storage()
            var length = Int32(MemoryLayout<sockaddr_storage>.size)
            let rc = withUnsafeMutablePointer(to: &storage) { pointer in
                pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { uv_udp_getsockname(handle, $0, &length) }
            }
            try UVError.check(rc, "udp_getsockname")
            let address = withUnsafePointer(to: &storage) { pointer in
                pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { SocketAddress($0) }
            }
            guard let address else { throw UVError(code: UVError.invalidArgument, operation: "udp_getsockname") }
            return address
        }
    }

    /// Whether libuv reads with recvmmsg on this socket.
    public var usesRecvmmsg: Bool {
        guard let handle else { return false }
        return uv_udp_using_recvmmsg(handle) != 0
    }

    /// Bytes and count of datagrams queued in libuv, waiting for the kernel.
    public var sendQueueBytes: Int { handle.map { uv_udp_get_send_queue_size($0) } ?? 0 }
    public var sendQueueCount: Int { handle.map { uv_udp_get_send_queue_count($0) } ?? 0 }

    // MARK: buffers

    /// Sets SO_RCVBUF (the kernel may cap it at net.core.rmem_max and reports it doubled).
    public func setReceiveBufferSize(_ bytes: Int32) throws(UVError) {
        var value = bytes
        try bufferSize(uv_recv_buffer_size, &value, "udp_recv_buffer_size")
    }

    /// Sets SO_SNDBUF (the kernel may cap it at net.core.wmem_max and reports it doubled).
    public func setSendBufferSize(_ bytes: Int32) throws(UVError) {
        var value = bytes
        try bufferSize(uv_send_buffer_size, &value, "udp_send_buffer_size")
    }

    /// The kernel's current SO_RCVBUF.
    public func receiveBufferSize() throws(UVError) -> Int32 {
        var value: Int32 = 0
        try bufferSize(uv_recv_buffer_size, &value, "udp_recv_buffer_size")
        return value
    }

    /// The kernel's current SO_SNDBUF.
    public func sendBufferSize() throws(UVError) -> Int32 {
        var value: Int32 = 0
        try bufferSize(uv_send_buffer_size, &value, "udp_send_buffer_size")
        return value
    }

    private func bufferSize(
        _ call: (UnsafeMutablePointer<uv_handle_t>?, UnsafeMutablePointer<Int32>?) -> Int32,
        _ value: inout Int32, _ operation: String
    ) throws(UVError) {
        guard let handle else { throw UVError.closed(operation) }
        try UVError.check(call(asHandle(handle), &value), operation)
    }

    // MARK: receive

    /// Starts delivering datagrams. The buffer is only valid during the call; copy what you keep.
    public func startReceiving(_ onDatagram: @escaping (UnsafeRawBufferPointer, SocketAddress) -> Void) throws(UVError) {
        guard let handle, !isClosing else { throw UVError.closed("udp_recv_start") }
        if slab == nil {
            slab = .allocate(byteCount: batch * UDPSocket.receiveSliceBytes, alignment: 16)
        }
        self.onDatagram = onDatagram
        try UVError.check(uv_udp_recv_start(handle, udpAllocate, udpReceive), "udp_recv_start")
    }

    /// Stops delivering datagrams (they wait in the kernel buffer).
    public func stopReceiving() {
        if let handle { uv_udp_recv_stop(handle) }
        onDatagram = nil
    }

    fileprivate func provideBuffer(_ buffer: UnsafeMutablePointer<uv_buf_t>) {
        // Every datagram of the previous batch was delivered synchronously, so the slab is free.
        guard let slab, !isClosing else {
            buffer.pointee = uv_buf_init(nil, 0)
            return
        }
        buffer.pointee = uv_buf_init(slab.baseAddress!.assumingMemoryBound(to: CChar.self), UInt32(slab.count))
    }

    fileprivate func received(_ count: Int, _ buffer: UnsafePointer<uv_buf_t>?, _ sender: UnsafePointer<sockaddr>?, _ flags: UInt32) {
        if count < 0 {
            onError?(UVError(code: Int32(count), operation: "udp_recv"))
            return
        }
        // No sender: "nothing more to read" or the UV_UDP_MMSG_FREE end of a batch. The slab is
        // ours and reused, so there is nothing to free.
        if sender == nil && flags & UInt32(UV_UDP_MMSG_FREE.rawValue) != 0 { receiveBatches &+= 1 }
        guard let sender, let buffer, !isClosing, let onDatagram else { return }
        if flags & UInt32(UV_UDP_PARTIAL.rawValue) != 0 {
            datagramsTruncated &+= 1
            return
        }
        guard let peer = SocketAddress(sender) else { return }
        datagramsReceived &+= 1
        onDatagram(UnsafeRawBufferPointer(start: buffer.pointee.base, count: count), peer)
    }

    // MARK: send

    /// Sends one datagram (possibly empty). Returns true if it went straight to the kernel, false
    /// if it was copied and queued. Throws ENOBUFS when the queue bound is reached (dropped), or
    /// the kernel's error (EMSGSIZE, ENETUNREACH...).
    @discardableResult
    public func send(_ bytes: UnsafeRawBufferPointer, to address: SocketAddress) throws(UVError) -> Bool {
        // An IPv6 socket reaches IPv4 peers through their mapped address (dual stack).
        let address = isIPv6 ? address.ipv4Mapped : address
        return try address.withSockAddr { (sockaddr, length) throws(UVError) -> Bool in
            try transmit(bytes, sockaddr, length, describing: address)
        }
    }

    /// Sends one datagram to the connected peer (see `connect(to:)`).
    @discardableResult
    public func send(_ bytes: UnsafeRawBufferPointer) throws(UVError) -> Bool {
        try transmit(bytes, nil, 0, describing: nil)
    }

    private func transmit(_ bytes: UnsafeRawBufferPointer, _ sockaddr: UnsafePointer<sockaddr>?, _ length: socklen_t,
                          describing address: SocketAddress?) throws(UVError) -> Bool {
        func failure(_ code: Int32) -> UVError {
            UVError(code: code, operation: address.map { "udp_send \($0)" } ?? "udp_send")
        }
        guard let handle, !isClosing else { throw UVError.closed("udp_send") }
        guard bytes.count <= UDPSocket.maximumDatagramBytes else { throw failure(UVError.messageTooLong) }
        if let sendBatch {
            if !sendBatch.hasRoom(for: bytes.count) {
                flushSends()
                // A flush reports to callbacks, which may have closed the socket.
                guard !isClosing else { throw UVError.closed("udp_send") }
            }
            sendBatch.append(bytes, to: sockaddr, length: length)
            return true
        }
        let base = UnsafeMutablePointer(mutating: bytes.baseAddress?.assumingMemoryBound(to: CChar.self))
        var buffer = uv_buf_init(base, UInt32(bytes.count))
        let sent = queueEverySendForTesting ? UVError.wouldBlock : uv_udp_try_send(handle, &buffer, 1, sockaddr)
        if sent >= 0 {
            datagramsSent &+= 1
            bytesSent &+= UInt64(bytes.count)
            return true
        }
        guard sent == UVError.wouldBlock else { throw failure(sent) }
        let queued = enqueue(bytes, sockaddr, on: handle)
        guard queued == 0 else { throw failure(queued) }
        return false
    }

    /// Copies a datagram into a libuv send request behind those already queued (libuv sends it
    /// when the socket is writable; the request is freed in its callback). Returns 0, or a
    /// negative error code (ENOBUFS past `maximumQueuedSendBytes`).
    private func enqueue(_ bytes: UnsafeRawBufferPointer, _ sockaddr: UnsafePointer<sockaddr>?,
                         on handle: UnsafeMutablePointer<uv_udp_t>) -> Int32 {
        if uv_udp_get_send_queue_size(handle) + bytes.count > maximumQueuedSendBytes {
            return UVError.noBufferSpace
        }
        // The queued request owns a copy of the payload until its callback.
        let header = UDPSocket.requestHeaderBytes
        let block = UnsafeMutableRawPointer.allocate(byteCount: header + max(bytes.count, 1), alignment: 16)
        let request = block.bindMemory(to: uv_udp_send_t.self, capacity: 1)
        let payload = block + header
        if let source = bytes.baseAddress, bytes.count > 0 {
            payload.copyMemory(from: source, byteCount: bytes.count)
        }
        var copy = uv_buf_init(payload.assumingMemoryBound(to: CChar.self), UInt32(bytes.count))
        let rc = uv_udp_send(request, handle, &copy, 1, sockaddr, udpSent)
        if rc < 0 {
            block.deallocate()
            return rc
        }
        sendsQueued &+= 1
        datagramsSent &+= 1
        bytesSent &+= UInt64(bytes.count)
        return 0
    }

    // MARK: batched send

    /// From now on `send` batches (see the type's comment): datagrams sent during one loop
    /// iteration leave together with sendmmsg(2). `send` then returns true once the datagram
    /// is copied into the batch and throws only what it can tell at once (closed, too long);
    /// refusals found at the flush go to `onSendError`, and `onSendsFlushed` counts what left.
    /// Idempotent. `flushSends()` or `close()` send a pending batch at once.
    public func startBatchingSends() throws(UVError) {
        guard let handle, !isClosing else { throw UVError.closed("udp_batch_sends") }
        guard sendBatch == nil else { return }
        let loop = handle.pointee.loop!
        // Not a weak reference: any weak reference sends every retain and release of the socket
        // (one pair per datagram received) down the runtime's slow path. The socket outlives
        // both hooks: its handle retains it until closed, and `close()` closes the hooks first
        // (a closing hook no longer fires).
        let flush: () -> Void = { [unowned(unsafe) self] in self.flushSends() }
        let afterIO = try LoopPhaseHook(loop: loop, phase: .afterIO, flush)
        do {
            flushHooks = [afterIO, try LoopPhaseHook(loop: loop, phase: .beforeWait, flush)]
        } catch {
            afterIO.close()
            throw error
        }
        sendBatch = UDPSendBatch(capacity: UDPSocket.sendBatchDatagrams, payloadCapacity: UDPSocket.sendBatchBytes)
    }

    /// Whether `send` batches (`startBatchingSends()`).
    public var isBatchingSends: Bool { sendBatch != nil }

    /// Datagrams waiting in the batch for the next flush.
    public var batchedSendCount: Int { sendBatch?.count ?? 0 }

    /// Sends the batch now, in order: as many datagrams as the kernel takes through sendmmsg(2),
    /// then, behind a full send buffer (EAGAIN, ENOBUFS), the rest through the queued path. A
    /// datagram the kernel refuses for itself (EAFNOSUPPORT, ENETUNREACH...) is reported and
    /// skipped; the others still go. Reports run after the batch is emptied.
    public func flushSends() {
        guard let sendBatch, !sendBatch.isEmpty, !isFlushing else { return }
        guard let handle else {
            sendBatch.removeAll()
            return
        }
        isFlushing = true
        let total = sendBatch.count
        var next = 0
        var flushedDatagrams = 0
        var flushedBytes = 0
        var failures: [UVError] = []
        var fd: uv_os_fd_t = -1
        // Behind datagrams libuv still queues, the batch queues too, to keep order.
        if !queueEverySendForTesting && uv_udp_get_send_queue_count(handle) == 0
            && uv_fileno(asHandle(handle), &fd) == 0 {
            while next < total {
                let sent = Int(inkuv_sendmmsg(fd, sendBatch.messages + next, UInt32(total - next), 0))
                if sent > 0 {
                    for index in next..<(next + sent) { flushedBytes += sendBatch.payload(index).count }
                    flushedDatagrams += sent
                    next += sent
                    sendBatches &+= 1
                    continue
                }
                let code = errno
                if code == EINTR { continue }
                if code == EAGAIN || code == EWOULDBLOCK || code == ENOBUFS { break }
                // sendmmsg reports an error only for the first message it could not send.
                failures.append(sendFailure(-code, to: sendBatch.destination(next)))
                next += 1
            }
            datagramsSent &+= UInt64(flushedDatagrams)
            bytesSent &+= UInt64(flushedBytes)
        }
        for index in next..<total {
            let payload = sendBatch.payload(index)
            let queued = enqueue(payload, sendBatch.destination(index), on: handle)
            if queued == 0 {
                flushedDatagrams += 1
                flushedBytes += payload.count
            } else {
                failures.append(sendFailure(queued, to: sendBatch.destination(index)))
            }
        }
        sendBatch.removeAll()
        isFlushing = false
        if flushedDatagrams > 0 { onSendsFlushed?(flushedDatagrams, flushedBytes) }
        for failure in failures { (onSendError ?? onError)?(failure) }
    }

    private func sendFailure(_ code: Int32, to destination: UnsafePointer<sockaddr>?) -> UVError {
        UVError(code: code, operation: destination.flatMap { SocketAddress($0) }.map { "udp_send \($0)" } ?? "udp_send")
    }

    /// Sends one datagram from an array (see `send(_:to:)` for an unsafe buffer).
    @discardableResult
    public func send(_ bytes: [UInt8], to address: SocketAddress) throws(UVError) -> Bool {
        let result = bytes.withUnsafeBytes { raw in Result { () throws(UVError) -> Bool in try send(raw, to: address) } }
        return try result.get()
    }

    /// Sends one datagram from an array to the connected peer.
    @discardableResult
    public func send(_ bytes: [UInt8]) throws(UVError) -> Bool {
        let result = bytes.withUnsafeBytes { raw in Result { () throws(UVError) -> Bool in try send(raw) } }
        return try result.get()
    }

    /// Fixes the peer (a client's server): `send(_:)` needs no address, only its datagrams are
    /// received, and an unreachable peer surfaces as ECONNREFUSED through `onError` or `send`
    /// (from the ICMP error) instead of silence.
    public func connect(to address: SocketAddress) throws(UVError) {
        guard let handle, !isClosing else { throw UVError.closed("udp_connect") }
        let address = isIPv6 ? address.ipv4Mapped : address
        let rc = address.withSockAddr { sockaddr, _ in uv_udp_connect(handle, sockaddr) }
        try UVError.check(rc, "udp_connect \(address)")
    }

    /// The connected peer, nil when not connected.
    public var remoteAddress: SocketAddress? {
        guard let handle else { return nil }
        var storage = sockaddr_storage()
        var length = Int32(MemoryLayout<sockaddr_storage>.size)
        return withUnsafeMutablePointer(to: &storage) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { address in
                uv_udp_getpeername(handle, address, &length) == 0 ? SocketAddress(address) : nil
            }
        }
    }

    /// Tests set this to exercise the queued path (loopback rarely fills a send buffer).
    var queueEverySendForTesting = false

    /// Payload offset inside a queued-send block (request size rounded up to 16).
    static let requestHeaderBytes = (MemoryLayout<uv_udp_send_t>.size + 15) & ~15

    fileprivate func sendCompleted(_ status: Int32) {
        // Cancelled sends at close are expected; anything else is worth reporting.
        if status < 0 && status != UVError.cancelled {
            onError?(UVError(code: status, operation: "udp_send"))
        }
    }

    // MARK: close

    /// Closes the socket; queued sends are cancelled. Idempotent, safe inside callbacks.
    public func close() {
        guard let handle, !isClosing else { return }
        // What this iteration batched still leaves, as it would have without batching.
        flushSends()
        guard !isClosing else { return }
        isClosing = true
        for hook in flushHooks { hook.close() }
        flushHooks = []
        uv_udp_recv_stop(handle)
        closeHandle(asHandle(handle))
    }

    func didClose() {
        handle = nil
        slab?.deallocate()
        slab = nil
        sendBatch = nil
        onDatagram = nil
        let onClose = self.onClose
        self.onClose = nil
        onError = nil
        onSendError = nil
        onSendsFlushed = nil
        onClose?()
    }
}

private func udpAllocate(_ handle: UnsafeMutablePointer<uv_handle_t>?, _ suggested: Int, _ buffer: UnsafeMutablePointer<uv_buf_t>?) {
    guard let buffer else { return }
    guard let socket = owner(handle, as: UDPSocket.self) else {
        buffer.pointee = uv_buf_init(nil, 0)
        return
    }
    socket.provideBuffer(buffer)
}

private func udpReceive(
    _ handle: UnsafeMutablePointer<uv_udp_t>?, _ count: Int, _ buffer: UnsafePointer<uv_buf_t>?,
    _ sender: UnsafePointer<sockaddr>?, _ flags: UInt32
) {
    guard let handle, let socket = owner(asHandle(handle), as: UDPSocket.self) else { return }
    socket.received(count, buffer, sender, flags)
}

private func udpSent(_ request: UnsafeMutablePointer<uv_udp_send_t>?, _ status: Int32) {
    guard let request else { return }
    if let handle = request.pointee.handle, let socket = owner(asHandle(handle), as: UDPSocket.self) {
        socket.sendCompleted(status)
    }
    // The request and its payload copy were one allocation.
    UnsafeMutableRawPointer(request).deallocate()
}
