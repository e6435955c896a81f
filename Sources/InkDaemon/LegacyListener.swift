import InkUV

/// One `--legacy HOST:PORT=ROOM` listener: every HYWhiteboard app that connects joins `room`
/// as a new author (see `LegacyPeer`).
final class LegacyListener {
    let room: String
    let listener: TCPListener
    private let context: LegacyContext
    private var peers: [ObjectIdentifier: LegacyPeer] = [:]
    private var nextPeerNumber: UInt64 = 1

    init(listener: TCPListener, room: String, context: LegacyContext) throws(UVError) {
        self.listener = listener
        self.room = room
        self.context = context
        listener.onError = { [weak self] error in
            self?.context.metrics.errors(kind: "accept").increment()
            self?.context.logger.warning("legacy accept failed", ["room": room, "error": error])
        }
        context.tcpRetransmitPolicy.apply(to: listener)
        try listener.listen { [weak self] connection in self?.accept(connection) }
    }

    var localAddress: SocketAddress? { listener.localAddress }
    var peerCount: Int { peers.count }

    private func accept(_ connection: TCPConnection) {
        context.metrics.connectionsAccepted.labels("legacy").increment()
        context.tcpRetransmitPolicy.apply(to: connection)
        let number = nextPeerNumber
        nextPeerNumber += 1
        let peer = LegacyPeer(connection: connection, room: room, number: number, context: context) { [weak self] peer in
            self?.peers[ObjectIdentifier(peer)] = nil
        }
        peers[ObjectIdentifier(peer)] = peer
        peer.start()
    }

    /// Stops accepting new devices (shutdown); connected ones stay until `closePeers`.
    func stopAccepting() { listener.close() }

    func closePeers(reason: String) {
        for peer in Array(peers.values) { peer.close(reason: reason) }
    }
}

/// What every legacy peer shares: the loop, the rooms, logging and metrics, the timing.
final class LegacyContext {
    let loop: EventLoop
    let driver: RelayDriver
    let logger: Logger
    let metrics: DaemonMetrics
    let tcpRetransmitPolicy: TCPRetransmitPolicy
    var heartbeatMicroseconds: UInt64
    var timeoutMicroseconds: UInt64
    /// High bits of every legacy peer's producer id, random per daemon start, so batches of a
    /// connection after a restart never look like duplicates of an earlier one.
    let originBase: UInt64

    init(loop: EventLoop, driver: RelayDriver, logger: Logger, metrics: DaemonMetrics, limits: DaemonLimits,
         tcpRetransmitPolicy: TCPRetransmitPolicy) {
        self.tcpRetransmitPolicy = tcpRetransmitPolicy
        self.loop = loop
        self.driver = driver
        self.logger = logger
        self.metrics = metrics
        heartbeatMicroseconds = limits.legacyHeartbeatMs * 1000
        timeoutMicroseconds = limits.legacyTimeoutMs * 1000
        originBase = UInt64(UInt32.random(in: 1...UInt32.max)) << 32
    }

    func apply(_ limits: DaemonLimits) {
        heartbeatMicroseconds = limits.legacyHeartbeatMs * 1000
        timeoutMicroseconds = limits.legacyTimeoutMs * 1000
    }
}
