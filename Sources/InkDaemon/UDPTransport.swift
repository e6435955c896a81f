import InkProtocol
import InkRelay
import InkUV

/// The native UDP listener: packets of sealed sessions (docs/protocol.md 4, 8.1), found by
/// connection id (not by address, so a device that roams keeps its session).
///
/// An unknown connection id opens a session only with an initiation that opens with the
/// daemon's key and carries a join, while the daemon has room (`maxSessions`), handshake budget
/// and its source host is within its rate of new sessions. A transport packet for an unknown
/// id is answered with a stateless reset (within the budget of unauthenticated answers), a key
/// request with the key, a protocol 1 frame with its refusal; everything else is dropped and
/// counted.
final class UDPTransport {
    let socket: UDPSocket
    /// Held without reference counting, like `NativeDatagramSession` does: the daemon owns
    /// and closes its transports, and a counted unowned reference cost an atomic retain and a
    /// slow-path release (the daemon has weak references) at every use, several a datagram.
    unowned(unsafe) let daemon: Daemon
    /// Every session's ARQ deadline, on one loop timer.
    let timers: SessionTimers
    private(set) var sessions: [UInt64: NativeDatagramSession] = [:]
    private var recentlyClosed = RecentIDs(capacity: UDPTransport.closedRemembered)
    private var newSessionRate: SourceRateLimiter
    /// Protocol 1 refusals per source host (one a second), and when each host was last logged.
    private var protocolOneRate = SourceRateLimiter(perSecond: 1)
    private var protocolOneLogged: [SocketAddress: UInt64] = [:]
    /// The session table changed since `udp-sessions` was last written.
    private(set) var sessionsDirty = false

    /// Connection ids of closed sessions remembered, so their stragglers open nothing.
    static let closedRemembered = 4096
    /// Receive buffer asked of the kernel (capped by net.core.rmem_max). Every member acks
    /// every batch it is sent, so thousands of sessions send tens of thousands of small
    /// datagrams a second: the default (about 200 KB, a few hundred datagrams) overflows
    /// whenever the loop is descheduled for a few milliseconds, and each lost batch then costs
    /// its whole room a retransmission.
    static let receiveBufferBytes: Int32 = 8 << 20
    /// Send buffer asked of the kernel: one batch fans out to a whole room at once.
    static let sendBufferBytes: Int32 = 4 << 20
    /// How often a host's protocol 1 refusals are logged (they are counted each time).
    static let protocolOneLogMicroseconds: UInt64 = 60_000_000

    /// Series updated per datagram, looked up once.
    private let datagramsReceived: CounterCell
    private let bytesReceived: CounterCell
    private let datagramsSent: CounterCell
    private let bytesSent: CounterCell
    private let unauthenticated: CounterCell
    private let replayed: CounterCell

    init(socket: UDPSocket, daemon: Daemon) throws(UVError) {
        self.socket = socket
        self.daemon = daemon
        timers = try SessionTimers(loop: daemon.loop)
        newSessionRate = SourceRateLimiter(perSecond: daemon.config.limits.newSessionsPerSecond)
        datagramsReceived = daemon.metrics.datagramsReceived.labels()
        bytesReceived = daemon.metrics.bytesReceived.labels("udp")
        datagramsSent = daemon.metrics.datagramsSent.labels()
        bytesSent = daemon.metrics.bytesSent.labels("udp")
        unauthenticated = daemon.metrics.errors(kind: "unauthenticated_packet")
        replayed = daemon.metrics.errors(kind: "replayed_packet")
        try? socket.setReceiveBufferSize(UDPTransport.receiveBufferBytes)
        try? socket.setSendBufferSize(UDPTransport.sendBufferBytes)
        socket.onError = { [weak daemon] error in
            daemon?.metrics.errors(kind: "udp_socket").increment()
            daemon?.logger.debug("udp error", ["error": error])
        }
        // One batch fans out to a whole room: its datagrams leave together with sendmmsg at
        // the end of the loop iteration, one system call instead of one per member. The
        // counters follow what each flush handed over, so a refused datagram is not counted.
        try socket.startBatchingSends()
        // The counters themselves, not a weak reference to the transport: an object with a weak
        // reference counts every retain and release on the runtime's slow path (several a datagram).
        socket.onSendsFlushed = { [datagramsSent, bytesSent] datagrams, bytes in
            datagramsSent.increment(by: UInt64(datagrams))
            bytesSent.increment(by: UInt64(bytes))
        }
        socket.onSendError = { [weak daemon] _ in daemon?.metrics.errors(kind: "udp_send").increment() }
        // Unretained, like `daemon`: no weak reference to the transport may exist (see above).
        // Installed last (nothing after it can fail), and `close()` closes the socket.
        try socket.startReceiving { [unowned(unsafe) self] bytes, peer in self.receive(bytes, from: peer) }
    }

    var localAddress: SocketAddress? { try? socket.localAddress }
    var sessionCount: Int { sessions.count }

    private func receive(_ buffer: UnsafeRawBufferPointer, from peer: SocketAddress) {
        datagramsReceived.increment()
        bytesReceived.increment(by: UInt64(buffer.count))
        guard buffer.count <= daemon.config.limits.maxDatagramBytes else {
            daemon.metrics.errors(kind: "oversized_datagram").increment()
            return
        }
        // The datagram is read where the socket left it: nothing is copied but what the ARQ
        // keeps (segment payloads), so the acks that make up half the traffic allocate nothing.
        guard let (type, connectionID) = PacketCodec.peek(buffer) else {
            if PacketCodec.isProtocolOne(buffer) { refuseProtocolOne(buffer, from: peer) } else {
                daemon.metrics.errors(kind: "garbage_datagram").increment()
            }
            return
        }
        if let session = sessions[connectionID] {
            session.receive(buffer, from: peer)
            return
        }
        switch type {
        case .initiation:
            openSession(buffer, connectionID: connectionID, from: peer)
        case .transportPhase0, .transportPhase1:
            // A session this daemon does not have (it restarted, or closed it): say so, once
            // the packet is large enough that the reset does not amplify.
            guard buffer.count > PacketCodec.resetBytes, answerBudget() else {
                daemon.metrics.errors(kind: "unknown_session_packet").increment()
                return
            }
            daemon.metrics.errors(kind: "reset_sent").increment()
            send(daemon.resets.packet(connectionID: connectionID), to: peer)
        case .keyRequest:
            guard buffer.count >= PacketCodec.keyRequestBytes, answerBudget() else {
                daemon.metrics.errors(kind: "garbage_datagram").increment()
                return
            }
            send(PacketCodec.keyReply(connectionID: connectionID, key: daemon.staticKey.publicKey), to: peer)
        case .response, .reset, .keyReply, .notice:
            // Answers a daemon never asked for: never answered, or two daemons could loop.
            daemon.metrics.errors(kind: "garbage_datagram").increment()
        }
    }

    private func answerBudget() -> Bool { daemon.unsealedAnswers.allow(nowMicroseconds: daemon.loop.now) }

    /// A new session from an initiation, if every bound allows (else a notice or nothing).
    private func openSession(_ buffer: UnsafeRawBufferPointer, connectionID: UInt64, from peer: SocketAddress) {
        guard connectionID != 0, !recentlyClosed.contains(connectionID) else {
            daemon.metrics.errors(kind: "closed_session_datagram").increment()
            return
        }
        newSessionRate.perSecond = daemon.config.limits.newSessionsPerSecond
        guard newSessionRate.allow(peer, nowMicroseconds: daemon.loop.now) else {
            daemon.metrics.errors(kind: "session_rate_limited").increment()
            return
        }
        daemon.handshakes.perSecond = daemon.config.limits.maxHandshakesPerSecond
        guard sessions.count < daemon.config.limits.maxSessions, daemon.handshakes.allow(nowMicroseconds: daemon.loop.now) else {
            daemon.metrics.errors(kind: sessions.count < daemon.config.limits.maxSessions ? "handshakes_rate_limited" : "too_many_sessions").increment()
            notice(.busy, connectionID: connectionID, to: peer)
            return
        }
        let initiation = Array(buffer)
        let now = Instant(microseconds: daemon.loop.now)
        switch SealedDatagramSession.accept(initiation: initiation, staticKey: daemon.staticKey, reset: daemon.resets, crypto: daemon.crypto, now: now) {
        case .failure(.keyMismatch):
            daemon.metrics.handshakes.labels("key_mismatch").increment()
            notice(.keyMismatch, connectionID: connectionID, to: peer)
        case .failure:
            daemon.metrics.handshakes.labels("malformed").increment()
        case .success(let (sealed, join)):
            guard case .join? = try? SessionMessageCodec.decodeClient(join) else {
                daemon.metrics.handshakes.labels("not_a_join").increment()
                return
            }
            daemon.metrics.handshakes.labels("accepted").increment()
            let session = NativeDatagramSession(sealed: sealed, join: join, address: peer, transport: self)
            sessions[connectionID] = session
            sessionsDirty = true
            daemon.metrics.sessions.labels("udp").add(1)
            session.start()
        }
    }

    private func notice(_ code: NoticeCode, connectionID: UInt64, to peer: SocketAddress) {
        guard answerBudget() else { return }
        send(PacketCodec.notice(connectionID: connectionID, code: code, key: daemon.staticKey.publicKey), to: peer)
    }

    /// A protocol 1 device: its refusal, at most once a second per host; logged once a minute.
    private func refuseProtocolOne(_ buffer: UnsafeRawBufferPointer, from peer: SocketAddress) {
        daemon.metrics.errors(kind: "protocol1_refused").increment()
        let now = daemon.loop.now
        guard protocolOneRate.allow(peer, nowMicroseconds: now), answerBudget(),
              let answer = ProtocolOneRefusal.datagram(answering: Array(buffer), timestamp: UInt32(truncatingIfNeeded: now)) else { return }
        send(answer, to: peer)
        let host = peer.withPort(0)
        if now &- (protocolOneLogged[host] ?? 0) >= UDPTransport.protocolOneLogMicroseconds || protocolOneLogged[host] == nil {
            if protocolOneLogged.count >= SourceRateLimiter.maximumHosts { protocolOneLogged.removeAll() }
            protocolOneLogged[host] = now
            daemon.logger.notice("refused a protocol 1 (unsealed) native device: it must be updated", ["address": peer])
        }
    }

    /// A datagram a session's sealing refused (counted; it changed nothing).
    func countDropped(_ reason: DropReason) {
        switch reason {
        case .unauthenticated: unauthenticated.increment()
        case .replayed: replayed.increment()
        case .malformed: daemon.metrics.errors(kind: "malformed_packet").increment()
        case .unexpected: daemon.metrics.errors(kind: "unexpected_packet").increment()
        case .forgedReset: daemon.metrics.errors(kind: "forged_reset").increment()
        }
    }

    /// A session moved: the saved table is stale.
    func sessionsChanged() { sessionsDirty = true }

    /// Sends one datagram of a session (batched: it leaves by the end of this loop iteration;
    /// `onSendsFlushed` counts it then).
    func send(_ datagram: [UInt8], to address: SocketAddress) {
        do {
            try socket.send(datagram, to: address)
        } catch {
            daemon.metrics.errors(kind: "udp_send").increment()
        }
    }

    /// A session ended: forget it, remember its id.
    func remove(_ session: NativeDatagramSession) {
        guard sessions.removeValue(forKey: session.connectionID) != nil else { return }
        recentlyClosed.insert(session.connectionID)
        sessionsDirty = true
        daemon.metrics.sessions.labels("udp").add(-1)
    }

    /// The table for `udp-sessions` (connection ids and addresses), marked clean.
    func takeSessionTable() -> [(UInt64, SocketAddress)] {
        sessionsDirty = false
        return sessions.keys.sorted().map { ($0, sessions[$0]!.address) }
    }

    /// After a restart: a reset to each session the previous run had (docs/protocol.md 8.1).
    func sendRestartResets(_ table: [(UInt64, SocketAddress)]) -> Int {
        var sent = 0
        for (id, address) in table where sessions[id] == nil && address.family == localAddress?.family {
            send(daemon.resets.packet(connectionID: id), to: address)
            sent += 1
        }
        return sent
    }

    /// Samples RTT and retransmissions of every session (housekeeping). In table order: the
    /// counts do not depend on it (the histogram's float sum only in its last bits), and sorting
    /// thousands of ids and looking each up again every second cost more than the sampling.
    func sampleSessions() {
        let rtt = daemon.metrics.rtt.labels()
        let retransmissions = daemon.metrics.retransmissions.labels()
        for session in sessions.values { session.sampleMetrics(rtt: rtt, retransmissions: retransmissions) }
    }

    /// Segments held out of order, all sessions.
    var reorderDepth: Int { sessions.values.reduce(0) { $0 + $1.outOfOrderSegments } }

    /// Stops taking new sessions (shutdown); existing ones finish their goodbye.
    func stopAccepting() { newSessionRate.perSecond = 0 }

    func close() {
        for id in sessions.keys.sorted() { sessions[id]?.terminate(reason: "daemon stopping") }
        socket.close()
        timers.close()
    }
}

/// A bounded set of ids that forgets the oldest first.
struct RecentIDs {
    let capacity: Int
    private var order: [UInt64] = []
    private var head = 0
    private var members: Set<UInt64> = []

    init(capacity: Int) { self.capacity = capacity }

    func contains(_ id: UInt64) -> Bool { members.contains(id) }

    mutating func insert(_ id: UInt64) {
        guard !members.contains(id) else { return }
        if order.count < capacity {
            order.append(id)
        } else {
            members.remove(order[head])
            order[head] = id
            head = (head + 1) % capacity
        }
        members.insert(id)
    }
}

/// New sessions per source host: a token bucket per host, `perSecond` tokens a second,
/// bursts up to the same. The table is bounded; when full it starts over (a flood of spoofed
/// hosts then only resets the buckets, it never grows memory).
struct SourceRateLimiter {
    var perSecond: Int
    private var buckets: [SocketAddress: (tokens: Double, at: UInt64)] = [:]
    /// Most source hosts tracked.
    static let maximumHosts = 16_384

    init(perSecond: Int) { self.perSecond = perSecond }

    mutating func allow(_ peer: SocketAddress, nowMicroseconds now: UInt64) -> Bool {
        guard perSecond > 0 else { return false }
        let host = peer.withPort(0)
        let capacity = Double(perSecond)
        var bucket = buckets[host] ?? (capacity, now)
        bucket.tokens = min(capacity, bucket.tokens + Double(now &- bucket.at) / 1_000_000 * capacity)
        bucket.at = now
        guard bucket.tokens >= 1 else {
            buckets[host] = bucket
            return false
        }
        bucket.tokens -= 1
        if buckets[host] == nil && buckets.count >= SourceRateLimiter.maximumHosts { buckets.removeAll() }
        buckets[host] = bucket
        return true
    }
}
