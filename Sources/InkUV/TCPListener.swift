import CLibUV
import Glibc

/// A listening TCP socket; each accepted peer becomes a `TCPConnection`.
public final class TCPListener: HandleOwner {
    /// Default listen backlog.
    public static let defaultBacklog: Int32 = 128

    private var handle: UnsafeMutablePointer<uv_tcp_t>?
    private var onConnection: ((TCPConnection) -> Void)?
    /// Failed accepts (EMFILE...); the listener keeps listening.
    public var onError: ((UVError) -> Void)?
    /// Called once when the listener has been closed and freed.
    public var onClose: (() -> Void)?
    public private(set) var isClosing = false

    /// Binds a new socket (SO_REUSEADDR, as libuv does). Port 0 picks a free port.
    /// An address already in use may only be reported by `listen`.
    public convenience init(loop: EventLoop, bindTo address: SocketAddress, ipv6Only: Bool = false) throws(UVError) {
        try self.init(loop: loop)
        let flags: UInt32 = ipv6Only && address.family == .ipv6 ? UInt32(UV_TCP_IPV6ONLY.rawValue) : 0
        let rc = address.withSockAddr { sockaddr, _ in uv_tcp_bind(handle, sockaddr, flags) }
        if rc < 0 {
            close()
            throw UVError(code: rc, operation: "tcp_bind \(address)")
        }
        bindTarget = address
    }

    /// Adopts an already bound (possibly listening) stream socket, e.g. from systemd socket
    /// activation. The socket becomes owned by this object.
    public convenience init(loop: EventLoop, adopting fd: Int32) throws(UVError) {
        try self.init(loop: loop)
        let rc = uv_tcp_open(handle, fd)
        if rc < 0 {
            close()
            throw UVError(code: rc, operation: "tcp_open fd \(fd)")
        }
    }

    private init(loop: EventLoop) throws(UVError) {
        let handle = UnsafeMutablePointer<uv_tcp_t>.allocate(capacity: 1)
        let rc = uv_tcp_init(loop.raw, handle)
        if rc < 0 {
            discardUninitialised(handle)
            throw UVError(code: rc, operation: "tcp_init")
        }
        self.handle = handle
        attach(self, to: asHandle(handle))
    }
    private var bindTarget: SocketAddress?

    /// TCP_RTO_MAX_MS on the listening socket: bounds its SYN-ACK retransmissions' backoff and is
    /// what accepted connections start with. Throws `UVError.optionUnsupported` before Linux 6.15.
    public func setRetransmitCeiling(milliseconds: UInt32) throws(UVError) {
        guard let handle, !isClosing else { throw UVError.closed("tcp_rto_max") }
        try InkUV.setRetransmitCeiling(handle, milliseconds: milliseconds, "tcp_rto_max")
    }

    /// The bound address (with the port the kernel picked for port 0).
    public var localAddress: SocketAddress? { handle.flatMap { tcpAddress($0, uv_tcp_getsockname) } }

    /// Starts accepting; `onConnection` gets each new connection (not yet reading).
    public func listen(backlog: Int32 = TCPListener.defaultBacklog, _ onConnection: @escaping (TCPConnection) -> Void) throws(UVError) {
        guard let handle, !isClosing else { throw UVError.closed("tcp_listen") }
        self.onConnection = onConnection
        let target = bindTarget.map { " \($0)" } ?? ""
        try UVError.check(uv_listen(asStream(handle), backlog, tcpIncoming), "tcp_listen" + target)
    }

    fileprivate func incoming(_ status: Int32) {
        guard let handle, !isClosing else { return }
        if status < 0 {
            onError?(UVError(code: status, operation: "tcp_accept"))
            return
        }
        let connection: TCPConnection
        do {
            connection = try TCPConnection(loop: handle.pointee.loop)
        } catch {
            onError?(error)
            return
        }
        let rc = connection.accept(from: asStream(handle))
        if rc < 0 {
            connection.close()
            onError?(UVError(code: rc, operation: "tcp_accept"))
            return
        }
        onConnection?(connection)
    }

    /// Stops listening and closes the socket; accepted connections stay open. Idempotent.
    public func close() {
        guard let handle, !isClosing else { return }
        isClosing = true
        closeHandle(asHandle(handle))
    }

    func didClose() {
        handle = nil
        onConnection = nil
        onError = nil
        let onClose = self.onClose
        self.onClose = nil
        onClose?()
    }
}

extension TCPConnection {
    /// Accepts the pending connection of `server` into this handle.
    func accept(from server: UnsafeMutablePointer<uv_stream_t>) -> Int32 {
        withStream { uv_accept(server, $0) }
    }
}

private func tcpIncoming(_ server: UnsafeMutablePointer<uv_stream_t>?, _ status: Int32) {
    guard let server, let listener = owner(asHandle(server), as: TCPListener.self) else { return }
    listener.incoming(status)
}
