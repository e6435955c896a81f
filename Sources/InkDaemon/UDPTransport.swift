import InkUV

/// The native UDP listener: datagrams of ARQ sessions, keyed by connection id.
final class UDPTransport {
    let socket: UDPSocket
    unowned let daemon: Daemon
    private(set) var sessionCount = 0

    init(socket: UDPSocket, daemon: Daemon) throws(UVError) {
        self.socket = socket
        self.daemon = daemon
        socket.onError = { [weak daemon] error in
            daemon?.metrics.errors(kind: "udp_socket").increment()
            daemon?.logger.debug("udp error", ["error": error])
        }
        try socket.startReceiving { [weak self] bytes, peer in self?.receive(bytes, from: peer) }
    }

    var localAddress: SocketAddress? { try? socket.localAddress }

    private func receive(_ bytes: UnsafeRawBufferPointer, from peer: SocketAddress) {
        daemon.metrics.datagramsReceived.increment()
        daemon.metrics.bytesReceived.labels("udp").increment(by: UInt64(bytes.count))
        guard bytes.count <= daemon.config.limits.maxDatagramBytes else {
            daemon.metrics.errors(kind: "oversized_datagram").increment()
            return
        }
        // No native session layer yet: every datagram is dropped and counted.
        daemon.metrics.errors(kind: "garbage_datagram").increment()
    }

    func refreshMetrics() {}

    func close() { socket.close() }
}


extension UDPTransport {
    /// Tells every session the daemon is going away (before `close`).
    func sayGoodbye() {}
}
