import InkProtocol
import InkRelay
import InkUV

/// The native TCP listener: session messages in length-prefixed frames (`StreamFrameDecoder`),
/// for networks that block UDP. A frame over `--max-frame` closes that connection only.
final class TCPTransport {
    let listener: TCPListener
    unowned let daemon: Daemon
    private var connections: [ObjectIdentifier: NativeStreamConnection] = [:]

    init(listener: TCPListener, daemon: Daemon) throws(UVError) {
        self.listener = listener
        self.daemon = daemon
        listener.onError = { [weak daemon] error in
            daemon?.metrics.errors(kind: "accept").increment()
            daemon?.logger.warning("tcp accept failed", ["error": error])
        }
        daemon.tcpRetransmitPolicy.apply(to: listener)
        try listener.listen { [weak self] connection in self?.accept(connection) }
    }

    var localAddress: SocketAddress? { listener.localAddress }
    var sessionCount: Int { connections.count }

    private func accept(_ connection: TCPConnection) {
        daemon.metrics.connectionsAccepted.labels("tcp").increment()
        guard connections.count < daemon.config.limits.maxSessions else {
            daemon.metrics.errors(kind: "too_many_sessions").increment()
            connection.close()
            return
        }
        daemon.tcpRetransmitPolicy.apply(to: connection)
        let peer = NativeStreamConnection(connection: connection, daemon: daemon) { [weak self] peer in
            self?.connections[ObjectIdentifier(peer)] = nil
        }
        connections[ObjectIdentifier(peer)] = peer
        peer.start()
    }

    func stopAccepting() { listener.close() }

    func closeAll(reason: String) {
        for peer in Array(connections.values) { peer.close(reason: reason) }
    }
}

/// One native TCP connection: one relay session; the stream's write queue is its backpressure.
final class NativeStreamConnection: RelaySessionTransport {
    let connection: TCPConnection
    unowned let daemon: Daemon
    private let onClosed: (NativeStreamConnection) -> Void
    private var decoder: StreamFrameDecoder
    private var remote = "?"
    private var closed = false
    private var session: SessionID?
    private var blocked = false

    /// Queued bytes above which the relay is told to hold back (it resumes when the queue drains).
    static let backpressureHighBytes = 1 << 20

    init(connection: TCPConnection, daemon: Daemon, onClosed: @escaping (NativeStreamConnection) -> Void) {
        self.connection = connection
        self.daemon = daemon
        self.onClosed = onClosed
        decoder = StreamFrameDecoder(maxFrameBytes: daemon.config.limits.maxFrameBytes)
    }

    func start() {
        remote = connection.remoteAddress?.description ?? "?"
        daemon.metrics.sessions.labels("tcp").add(1)
        try? connection.setNoDelay(true)
        connection.onError = { [weak self] error in self?.close(reason: "write failed: \(error)") }
        connection.onDrain = { [weak self] in
            guard let self, self.blocked, let session = self.session else { return }
            self.blocked = false
            self.daemon.driver.ready(session)
        }
        session = daemon.driver.open(self, kind: .tcp)
        guard !closed else { return }
        do {
            try connection.startReading({ [weak self] bytes in self?.received(bytes) },
                                        onEnd: { [weak self] error in self?.close(reason: error.map { "read failed: \($0)" } ?? "peer closed") })
        } catch {
            close(reason: "read failed: \(error)")
        }
    }

    private func received(_ bytes: UnsafeRawBufferPointer) {
        guard !closed else { return }
        daemon.metrics.bytesReceived.labels("tcp").increment(by: UInt64(bytes.count))
        decoder.handleBytes(bytes)
        do {
            while let message = try decoder.pollFrame() {
                handle(message)
                if closed { return }
            }
        } catch {
            daemon.metrics.errors(kind: "bad_frame").increment()
            close(reason: "bad frame: \(error)")
        }
    }

    /// One session message from the device.
    private func handle(_ message: [UInt8]) {
        if let session { daemon.driver.message(message, from: session) }
    }

    func deliver(_ message: ServerMessage, encoder: inout SharedMessageEncoder) {
        guard !closed else { return }
        let bytes = StreamFrameDecoder.frame(encoder.encode(message))
        do {
            let queued = try connection.write(bytes)
            daemon.metrics.bytesSent.labels("tcp").increment(by: UInt64(bytes.count))
            if !blocked && queued > NativeStreamConnection.backpressureHighBytes, let session {
                blocked = true
                daemon.driver.backpressure(session)
            }
        } catch {
            close(reason: error.code == UVError.noBufferSpace ? "peer too slow (write queue full)" : "write failed: \(error)")
        }
    }

    /// The relay is done with the session: send what is queued (its goodbye), then FIN.
    func relayClosed(_ reason: GoingAwayReason) {
        session = nil
        guard !closed else { return }
        connection.stopReading()
        connection.shutdown { [weak self] _ in self?.close(reason: "session closed: \(reason)") }
    }

    func close(reason: String) {
        guard !closed else { return }
        closed = true
        daemon.metrics.sessions.labels("tcp").add(-1)
        connection.close()
        daemon.logger.info("tcp connection closed", ["remote": remote, "reason": reason])
        if let session {
            self.session = nil
            daemon.driver.transportClosed(session)
        }
        onClosed(self)
    }
}
