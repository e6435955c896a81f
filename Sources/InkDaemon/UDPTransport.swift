import InkProtocol
import InkRelay
import InkUV

/// The native UDP listener: datagrams of ARQ sessions, found by connection id (not by address,
/// so a device that roams keeps its session).
///
/// A datagram with an unknown connection id opens a session only if it is a well-formed data
/// frame, the daemon has room (`maxSessions`) and its source host is within its rate of new
/// sessions. Anything else is dropped and counted; no reply goes to an unknown sender.
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

    /// Series updated per datagram, looked up once.
    private let datagramsReceived: CounterCell
    private let bytesReceived: CounterCell
    private let datagramsSent: CounterCell
    private let bytesSent: CounterCell

    init(socket: UDPSocket, daemon: Daemon) throws(UVError) {
        self.socket = socket
        self.daemon = daemon
        timers = try SessionTimers(loop: daemon.loop)
        newSessionRate = SourceRateLimiter(perSecond: daemon.config.limits.newSessionsPerSecond)
        datagramsReceived = daemon.metrics.datagramsReceived.labels()
        bytesReceived = daemon.metrics.bytesReceived.labels("udp")
        datagramsSent = daemon.metrics.datagramsSent.labels()
        bytesSent = daemon.metrics.bytesSent.labels("udp")
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
        guard let connectionID = FrameCodec.connectionID(of: buffer) else {
            daemon.metrics.errors(kind: "garbage_datagram").increment()
            return
        }
        if let session = sessions[connectionID] {
            session.receive(buffer, from: peer)
            return
        }
        guard let frame = try? FrameCodec.decode(buffer), frame.kind == .data else {
            daemon.metrics.errors(kind: "garbage_datagram").increment()
            return
        }
        guard !recentlyClosed.contains(connectionID) else {
            daemon.metrics.errors(kind: "closed_session_datagram").increment()
            return
        }
        guard sessions.count < daemon.config.limits.maxSessions else {
            daemon.metrics.errors(kind: "too_many_sessions").increment()
            return
        }
        newSessionRate.perSecond = daemon.config.limits.newSessionsPerSecond
        guard newSessionRate.allow(peer, nowMicroseconds: daemon.loop.now) else {
            daemon.metrics.errors(kind: "session_rate_limited").increment()
            return
        }
        let session = NativeDatagramSession(connectionID: connectionID, address: peer, transport: self)
        sessions[connectionID] = session
        daemon.metrics.sessions.labels("udp").add(1)
        session.start()
        session.receive(buffer, from: peer)
    }

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
        daemon.metrics.sessions.labels("udp").add(-1)
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
