import InkLegacy
import InkProtocol
import InkUV

/// One `--legacy HOST:PORT=ROOM` listener: every HYWhiteboard app that connects (the app in
/// client mode, its user typed `IP PORT`) joins `room` as a new author (see `LegacyPeer`).
/// With `@CIDR,...` only apps from those networks do; any other connection is closed at
/// accept, counted and logged (`LegacyRefusalLog`, one line per address a minute).
final class LegacyListener {
    let room: String
    let listener: TCPListener
    /// The networks admitted; empty: every address.
    let networks: [AddressPrefix]
    private let context: LegacyContext
    private var peers = LegacyPeers()

    init(listener: TCPListener, room: String, networks: [AddressPrefix] = [], context: LegacyContext) throws(UVError) {
        self.listener = listener
        self.room = room
        self.networks = networks
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

    /// Whether a device at `host` (port 0) has a connection here.
    func hasPeer(from host: SocketAddress) -> Bool {
        peers.contains(from: host)
    }

    private func accept(_ connection: TCPConnection) {
        guard admits(connection) else { return }
        context.metrics.connectionsAccepted.labels("legacy").increment()
        context.tcpRetransmitPolicy.apply(to: connection)
        peers.start(connection, room: room, context: context)
    }

    /// Whether the device's address is in `networks`; a refused connection is closed here.
    /// Legacy apps cannot encrypt or prove who they are: the network is the only check.
    private func admits(_ connection: TCPConnection) -> Bool {
        guard !networks.isEmpty else { return true }
        let remote = connection.remoteAddress
        if let remote, networks.contains(where: { $0.contains(remote) }) { return true }
        connection.close()
        context.metrics.legacyRefused.labels(room).increment()
        let host = remote.map { $0.unmappedIPv4.withPort(0) }
        if let earlier = context.refusals.record(host, now: context.loop.now) {
            context.logger.warning("legacy device refused: its address is outside the listener's networks", [
                "room": room, "address": host?.host ?? "?", "listener": localAddress?.description ?? "?",
                "networks": networks.map(\.description).joined(separator: ","), "refused_unlogged": earlier,
            ])
        }
        return false
    }

    /// Stops accepting new devices (shutdown); connected ones stay until `closePeers`.
    func stopAccepting() { listener.close() }

    func closePeers(reason: String) { peers.closeAll(reason: reason) }
}

/// The connected apps of one listener or connector.
final class LegacyPeers {
    private var peers: [ObjectIdentifier: LegacyPeer] = [:]
    var count: Int { peers.count }

    /// Whether a device at `host` (port 0) is connected.
    func contains(from host: SocketAddress) -> Bool {
        peers.values.contains { $0.connection.remoteAddress.map { $0.unmappedIPv4.withPort(0) == host } ?? false }
    }

    /// Starts a peer on `connection` (`configure` sees it first); `closed` runs when it goes.
    func start(_ connection: TCPConnection, room: String, context: LegacyContext, configure: (LegacyPeer) -> Void = { _ in },
               closed: @escaping () -> Void = {}) {
        let peer = LegacyPeer(connection: connection, room: room, number: context.nextPeerNumber(), context: context) { [weak self] peer in
            self?.peers[ObjectIdentifier(peer)] = nil
            closed()
        }
        peers[ObjectIdentifier(peer)] = peer
        configure(peer)
        peer.start()
    }

    func closeAll(reason: String) {
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
    var sessionConfiguration: LegacySessionConfiguration
    /// High bits of every legacy peer's producer id, random per daemon start, so batches of a
    /// connection after a restart never look like duplicates of an earlier one.
    let originBase: UInt64
    /// When each refused address was last logged (all listeners).
    let refusals = LegacyRefusalLog()
    /// When each address whose join the room refused (a quota, a full room) was last logged.
    let joinRefusals = LegacyRefusalLog()
    private var peerNumber: UInt64 = 0

    init(loop: EventLoop, driver: RelayDriver, logger: Logger, metrics: DaemonMetrics, limits: DaemonLimits,
         tcpRetransmitPolicy: TCPRetransmitPolicy) {
        self.tcpRetransmitPolicy = tcpRetransmitPolicy
        self.loop = loop
        self.driver = driver
        self.logger = logger
        self.metrics = metrics
        sessionConfiguration = LegacyContext.configuration(limits, wallClockAtZeroMs: WallClock.milliseconds() &- loop.now / 1000)
        originBase = UInt64(UInt32.random(in: 1...UInt32.max)) << 32
    }

    /// Numbers the legacy connections of this daemon run (their user names and producer ids).
    func nextPeerNumber() -> UInt64 {
        peerNumber += 1
        return peerNumber
    }

    func apply(_ limits: DaemonLimits) {
        sessionConfiguration = LegacyContext.configuration(limits, wallClockAtZeroMs: sessionConfiguration.wallClockAtZeroMs)
    }

    static func configuration(_ limits: DaemonLimits, wallClockAtZeroMs: UInt64) -> LegacySessionConfiguration {
        var c = LegacySessionConfiguration()
        c.heartbeatInterval = .milliseconds(limits.legacyHeartbeatMs)
        c.silenceTimeout = .milliseconds(limits.legacyTimeoutMs)
        c.screenWait = .milliseconds(limits.legacyScreenWaitMs)
        c.wallClockAtZeroMs = wallClockAtZeroMs
        return c
    }
}
