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

/// One native TCP connection: a sealed stream (docs/protocol.md 4.6) carrying one relay session;
/// the stream's write queue is its backpressure. Its first message decides: an initiation opens
/// the session, a key request gets the key, a protocol 1 message gets its refusal; anything
/// else, or a message that does not open later, closes the connection.
final class NativeStreamConnection: RelaySessionTransport {
    let connection: TCPConnection
    unowned let daemon: Daemon
    private let onClosed: (NativeStreamConnection) -> Void
    private var decoder: StreamFrameDecoder
    private var remote = "?"
    private var closed = false
    private var session: SessionID?
    private var sealed: SealedStreamSession?
    private var answeredKeyRequest = false
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

    /// One stream message from the device.
    private func handle(_ message: [UInt8]) {
        guard let sealed else {
            first(message)
            return
        }
        do {
            try sealed.handleMessage(message, now: Instant(microseconds: daemon.loop.now))
        } catch {
            daemon.metrics.errors(kind: error == .unauthenticated ? "unauthenticated_packet" : "unexpected_packet").increment()
            close(reason: "sealed stream: \(error)")
            return
        }
        drainEvents()
    }

    /// The stream's first message: what kind of peer this is (`Daemon.admitStream`).
    private func first(_ message: [UInt8]) {
        switch daemon.admitStream(message, remote: remote, keyRequested: answeredKeyRequest) {
        case .answer(let reply):
            answeredKeyRequest = true
            write(StreamFrameDecoder.frame(reply))
        case .answerAndClose(let answer, let reason):
            write(StreamFrameDecoder.frame(answer))
            finishAndClose(reason)
        case .close(let reason):
            close(reason: reason)
        case .accepted(let stream, let join):
            sealed = stream
            flushSealed()
            session = daemon.driver.open(self, kind: .tcp, confirmed: false, from: connection.remoteAddress)
            if let session, !closed { daemon.driver.message(join, from: session) }
        }
    }

    private func drainEvents() {
        guard let sealed else { return }
        while !closed, let event = sealed.pollEvent() {
            switch event {
            case .delivered(let message):
                if let session { daemon.driver.message(message, from: session) }
            case .confirmed:
                if let session { daemon.driver.confirmed(session) }
            default:
                break
            }
        }
        flushSealed()
    }

    private func flushSealed() {
        guard let sealed else { return }
        while let m = sealed.pollMessage() { write(StreamFrameDecoder.frame(m)) }
    }

    var linkStatus: LinkStatus {
        var status = LinkStatus(address: connection.remoteAddress, tcp: connection.info)
        status.sealed = sealed != nil && daemon.sealsSessions
        return status
    }

    private func write(_ bytes: [UInt8]) {
        guard !closed else { return }
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

    func deliver(_ message: ServerMessage, encoder: inout SharedMessageEncoder) {
        guard !closed, let sealed else { return }
        sealed.send(encoder.encode(message), now: Instant(microseconds: daemon.loop.now))
        flushSealed()
    }

    /// The relay is done with the session: send what is queued (its goodbye), then FIN.
    func relayClosed(_ reason: GoingAwayReason) {
        session = nil
        guard !closed else { return }
        finishAndClose("session closed: \(reason)")
    }

    /// Writes what is queued, half-closes, then closes.
    private func finishAndClose(_ reason: String) {
        connection.stopReading()
        connection.shutdown { [weak self] _ in self?.close(reason: reason) }
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
