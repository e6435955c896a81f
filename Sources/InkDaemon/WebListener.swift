import InkUV
import InkWeb

/// `--web HOST:PORT`: the status page, the board pages and the JavaScript client (built into the
/// binary), and browsers' sessions over WebSockets (docs/protocol.md 8.5). One port serves
/// HTTPS and plain HTTP: a connection whose first byte starts a TLS handshake gets TLS.
final class WebListener {
    let listener: TCPListener
    unowned let daemon: Daemon
    let tls: TLSServerContext?
    private var connections: [ObjectIdentifier: WebConnection] = [:]
    private var sweepTimer: LoopTimer?

    /// How often idle and slow connections are looked at.
    static let sweepMicroseconds: UInt64 = 1_000_000

    init(listener: TCPListener, daemon: Daemon, tls: TLSServerContext?) throws(UVError) {
        self.listener = listener
        self.daemon = daemon
        self.tls = tls
        listener.onError = { [weak daemon] error in
            daemon?.metrics.errors(kind: "accept").increment()
            daemon?.logger.warning("web accept failed", ["error": error])
        }
        daemon.tcpRetransmitPolicy.apply(to: listener)
        try listener.listen { [weak self] connection in self?.accept(connection) }
        let timer = try LoopTimer(loop: daemon.loop)
        timer.start(afterMicroseconds: WebListener.sweepMicroseconds, repeatingEveryMicroseconds: WebListener.sweepMicroseconds) { [weak self] in
            self?.sweep()
        }
        sweepTimer = timer
    }

    var localAddress: SocketAddress? { listener.localAddress }
    var connectionCount: Int { connections.count }

    private func accept(_ connection: TCPConnection) {
        daemon.metrics.connectionsAccepted.labels("web").increment()
        guard connections.count < daemon.config.limits.maxWebConnections else {
            daemon.metrics.errors(kind: "too_many_web_connections").increment()
            daemon.logger.warning("web connection refused: too many", ["remote": connection.remoteAddress?.description ?? "?",
                                                                       "limit": daemon.config.limits.maxWebConnections])
            connection.close()
            return
        }
        daemon.tcpRetransmitPolicy.apply(to: connection)
        let peer = WebConnection(connection: connection, listener: self) { [weak self] peer in
            self?.connections[ObjectIdentifier(peer)] = nil
        }
        connections[ObjectIdentifier(peer)] = peer
        peer.start()
    }

    private func sweep() {
        let now = daemon.loop.now
        for peer in Array(connections.values) { peer.checkDeadlines(now: now) }
    }

    func stopAccepting() {
        listener.close()
        sweepTimer?.close()
        sweepTimer = nil
    }

    func closeAll(reason: String) {
        for peer in Array(connections.values) { peer.close(reason: reason) }
    }
}
