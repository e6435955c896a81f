import InkUV

/// One `--legacy-connect HOST:PORT=ROOM`: an app in server mode listens (`HYServerManager`, one
/// client at a time), and inkwired connects to it as that client; whenever the connection
/// fails or ends (the app is not up yet, left its whiteboard, restarted) it connects again after
/// a delay that doubles up to `maxDelayMs`, and starts over once a connection held `stableMs`.
/// With an upload port (`--legacy-connect-upload`, the app's 57777) the connected app's screen
/// is also shown the background of the page it shows (`LegacyBackgroundPusher`).
final class LegacyConnector {
    let target: SocketAddress
    let room: String
    private let context: LegacyContext
    private let peers = LegacyPeers()
    private let backgrounds: LegacyBackgroundPusher?
    private var attempt: TCPConnection?
    private var timer: LoopTimer?
    private var delayMs = LegacyConnector.firstDelayMs
    private var connectedAt: UInt64?
    private var failures = 0
    private var stopped = false

    static let firstDelayMs: UInt64 = 500
    static let maxDelayMs: UInt64 = 30_000
    static let stableMs: UInt64 = 30_000

    init(target: SocketAddress, room: String, uploadPort: UInt16?, context: LegacyContext) throws(UVError) {
        self.target = target
        self.room = room
        self.context = context
        timer = try LoopTimer(loop: context.loop)
        backgrounds = try uploadPort.map { port throws(UVError) in try LegacyBackgroundPusher(target: target.withPort(port), room: room, context: context) }
    }

    var peerCount: Int { peers.count }

    func start() { connect() }

    private func connect() {
        guard !stopped else { return }
        do {
            attempt = try TCPConnection.connect(loop: context.loop, to: target) { [weak self] result in self?.connected(result) }
        } catch {
            failed(error)
        }
    }

    private func connected(_ result: Result<TCPConnection, UVError>) {
        attempt = nil
        guard !stopped else {
            if case .success(let connection) = result { connection.close() }
            return
        }
        switch result {
        case .success(let connection):
            context.metrics.connectionsAccepted.labels("legacy").increment()
            context.tcpRetransmitPolicy.apply(to: connection)
            connectedAt = context.loop.now
            failures = 0
            context.logger.info("legacy app connected", ["address": target, "room": room])
            let backgrounds = self.backgrounds
            // The session's own screen wait: nothing reaches the app's screen before it is up.
            let readyAt = context.loop.now + context.sessionConfiguration.screenWait.microseconds
            peers.start(connection, room: room, context: context, configure: { peer in
                peer.onShownBackground = { backgrounds?.backgroundChanged($0) }
            }, closed: { [weak self] in
                backgrounds?.boardClosed()
                self?.peerClosed()
            })
            if peers.count > 0 { backgrounds?.boardConnected(screenReadyAt: readyAt) }
        case .failure(let error):
            failed(error)
        }
    }

    private func failed(_ error: UVError) {
        failures += 1
        // The app is often simply not up yet: say so once, then quietly keep trying.
        if failures == 1 {
            context.logger.notice("legacy app unreachable; retrying", ["address": target, "room": room, "error": error])
        } else {
            context.logger.debug("legacy app still unreachable", ["address": target, "attempts": failures, "error": error])
        }
        schedule()
    }

    private func peerClosed() {
        if let at = connectedAt, context.loop.now - at >= LegacyConnector.stableMs * 1000 { delayMs = LegacyConnector.firstDelayMs }
        connectedAt = nil
        schedule()
    }

    private func schedule() {
        guard !stopped, let timer else { return }
        timer.start(afterMicroseconds: delayMs * 1000) { [weak self] in self?.connect() }
        delayMs = min(delayMs * 2, LegacyConnector.maxDelayMs)
    }

    /// Stops connecting; the connected app stays until `closePeers`.
    func stopConnecting() {
        stopped = true
        backgrounds?.stop()
        attempt?.close()
        attempt = nil
        timer?.close()
        timer = nil
    }

    func closePeers(reason: String) { peers.closeAll(reason: reason) }
}
