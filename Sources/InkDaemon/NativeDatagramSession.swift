import InkProtocol
import InkRelay
import InkUV

/// One native device over UDP: an `ARQSession` carrying session messages, one relay session,
/// its deadline (the ARQ's `pollTimeout`) in the transport's `SessionTimers`.
///
/// Roaming: a valid datagram of this connection id from a new address moves the session there.
/// Amplification: until an address proves it receives (a datagram from it echoes the timestamp
/// of a datagram we sent it), the bytes sent to it never exceed the bytes received from it;
/// datagrams beyond that wait (`maxHeldDatagrams`) for more to arrive.
final class NativeDatagramSession: RelaySessionTransport, DeadlineWheelMember {
    let connectionID: UInt64
    private(set) var address: SocketAddress
    private let arq: ARQSession
    // Held without reference counting: the transport and the daemon outlive every session,
    // and counted references to them (objects with weak references, so every count takes
    // the slow path) cost several atomic operations per datagram.
    private unowned(unsafe) let transport: UDPTransport
    private unowned(unsafe) let daemon: Daemon
    private var session: SessionID?
    private var path = PathBudget()
    private var held: [[UInt8]] = []
    /// A probe is out for the datagrams held now (one per arrival from the address or
    /// retransmission round).
    private var probing = false
    /// The whole millisecond this session's deadline is armed for (kept by `SessionTimers`).
    var wheelMilliseconds: UInt64?
    private var flushing = false
    private var flushAgain = false
    private var blocked = false
    /// Set when the relay closed the session: deliver the goodbye, then close.
    private var lingerUntil: UInt64?
    private var ended = false
    private var reportedRetransmissions = 0

    /// Datagrams waiting for the amplification budget; more are dropped (the ARQ resends).
    static let maxHeldDatagrams = 64
    /// Queued bytes above which the relay is told to hold back, and below which to resume.
    static let backpressureHighBytes = 1 << 20
    static let backpressureLowBytes = 256 << 10
    /// How long a closed session keeps retransmitting its goodbye.
    static let lingerMicroseconds: UInt64 = 1_000_000

    init(connectionID: UInt64, address: SocketAddress, transport: UDPTransport) {
        self.connectionID = connectionID
        self.address = address
        self.transport = transport
        daemon = transport.daemon
        arq = ARQSession(connectionID: connectionID, configuration: ARQConfiguration(), now: Instant(microseconds: transport.daemon.loop.now))
    }

    func start() {
        session = daemon.driver.open(self, kind: .udp)
    }

    // MARK: input

    /// One datagram, read in place (valid only during this call).
    func receive(_ datagram: UnsafeRawBufferPointer, from peer: SocketAddress) {
        guard !ended else { return }
        if peer != address {
            // Only a datagram the ARQ would accept may move the session.
            guard let frame = try? FrameCodec.decode(datagram), frame.connectionID == connectionID else {
                daemon.metrics.errors(kind: "garbage_datagram").increment()
                return
            }
            daemon.logger.info("session moved", ["connection": connectionID, "from": address, "to": peer])
            address = peer
            path = PathBudget()
            held = []
            path.noteReceived(datagram, frame: frame)
        } else {
            path.noteReceived(datagram, frame: nil)
        }
        probing = false
        arq.handleDatagram(datagram, now: Instant(microseconds: daemon.loop.now))
        releaseHeld()
        flush()
    }

    // MARK: relay -> device

    func deliver(_ message: ServerMessage, encoder: inout SharedMessageEncoder) {
        guard !ended else { return }
        do {
            try arq.send(encoder.encode(message))
        } catch {
            daemon.metrics.errors(kind: "arq_send").increment()
            terminate(reason: "send failed: \(error)")
            return
        }
        flush()
    }

    func relayClosed(_ reason: GoingAwayReason) {
        session = nil
        guard !ended else { return }
        lingerUntil = daemon.loop.now + NativeDatagramSession.lingerMicroseconds
        flush()
    }

    // MARK: pumping

    private func flush() {
        if flushing {
            flushAgain = true
            return
        }
        flushing = true
        repeat {
            flushAgain = false
            let now = Instant(microseconds: daemon.loop.now)
            while let datagram = arq.pollTransmit(now: now) { transmit(datagram) }
            while !ended, let event = arq.pollEvent() { handle(event) }
        } while flushAgain && !ended
        flushing = false
        guard !ended else { return }
        if let lingerUntil, arq.isIdle || daemon.loop.now >= lingerUntil {
            arq.close()
            let now = Instant(microseconds: daemon.loop.now)
            while let datagram = arq.pollTransmit(now: now) { transmit(datagram) }
            terminate(reason: "closed")
            return
        }
        updateBackpressure()
        armTimer()
    }

    private func handle(_ event: ARQEvent) {
        switch event {
        case .delivered(let message):
            if let session { daemon.driver.message(message, from: session) }
        case .peerClosed:
            terminate(reason: "device closed the session")
        case .peerUnreachable:
            terminate(reason: "device unreachable")
        case .failed(let error):
            daemon.metrics.errors(kind: "arq_failed").increment()
            terminate(reason: "protocol error: \(error)")
        case .peerReachable:
            break
        }
    }

    private func transmit(_ datagram: [UInt8]) {
        if path.allows(datagram.count) {
            path.noteSent(datagram)
            transport.send(datagram, to: address)
        } else if held.count < NativeDatagramSession.maxHeldDatagrams {
            daemon.metrics.errors(kind: "amplification_held").increment()
            held.append(datagram)
            probe(for: datagram)
        }
    }

    /// Asks an unproven address to prove it receives: a minimal ack-eliciting frame carrying
    /// the held datagram's timestamp. The device acknowledges it at once, echoing that
    /// timestamp, which validates the address and releases what waits.
    private func probe(for datagram: [UInt8]) {
        guard !probing, let timestamp = try? FrameCodec.decode(datagram).timestamp else { return }
        let probe = FrameCodec.encode(Frame(kind: .data, connectionID: connectionID, timestamp: timestamp, ackNow: true))
        guard path.allowsProbe(probe.count) else { return }
        probing = true
        path.noteSent(probe)
        transport.send(probe, to: address)
    }

    private func releaseHeld() {
        while let first = held.first, path.allows(first.count) {
            held.removeFirst()
            path.noteSent(first)
            transport.send(first, to: address)
        }
        // Emptied: the shared empty array (read on every datagram; this session's own empty
        // buffer was a cache miss each time).
        if held.isEmpty { held = [] }
    }

    private func updateBackpressure() {
        guard let session else { return }
        let queued = arq.queuedBytes
        if !blocked && queued > NativeDatagramSession.backpressureHighBytes {
            blocked = true
            daemon.driver.backpressure(session)
        } else if blocked && queued < NativeDatagramSession.backpressureLowBytes {
            blocked = false
            daemon.driver.ready(session)
        }
    }

    private func armTimer() {
        guard !ended else { return }
        var deadline = arq.pollTimeout()?.microseconds
        if let lingerUntil { deadline = min(deadline ?? lingerUntil, lingerUntil) }
        guard let deadline else {
            if wheelMilliseconds != nil { transport.timers.disarm(self) }
            return
        }
        transport.timers.arm(self, atMicroseconds: deadline)
    }

    /// The deadline passed (`SessionTimers`).
    func timerFired() {
        guard !ended else { return }
        // A retransmission round may probe again (within the budget): a lost probe or a lost
        // answer to it must not leave the held join answer waiting for the device's next
        // keepalive, seconds away.
        probing = false
        arq.handleTimeout(now: Instant(microseconds: daemon.loop.now))
        flush()
    }

    /// Segments held out of order right now.
    var outOfOrderSegments: Int { arq.outOfOrderSegments }

    /// RTT sample and new retransmissions (once a housekeeping round), into series the caller
    /// looked up once for every session.
    func sampleMetrics(rtt: HistogramCell, retransmissions: CounterCell) {
        let smoothed = arq.smoothedRTT.microseconds
        if smoothed > 0 { rtt.observe(Double(smoothed) / 1_000_000) }
        let sent = arq.retransmissions
        if sent > reportedRetransmissions {
            retransmissions.increment(by: UInt64(sent - reportedRetransmissions))
            reportedRetransmissions = sent
        }
    }

    /// Ends the session at once (device gone, protocol error, daemon stopping). Idempotent.
    func terminate(reason: String) {
        guard !ended else { return }
        ended = true
        transport.timers.disarm(self)
        daemon.logger.info("udp session ended", ["connection": connectionID, "address": address, "reason": reason])
        transport.remove(self)
        if let session {
            self.session = nil
            daemon.driver.transportClosed(session)
        }
    }
}

/// The amplification rule for one address: bytes out never exceed bytes in until the address
/// echoes the timestamp of a datagram we sent it.
struct PathBudget {
    private(set) var validated = false
    private var received = 0
    private var sent = 0
    private var sentTimestamps: [UInt32] = []
    /// Timestamps of unvalidated sends remembered for the echo check.
    static let rememberedTimestamps = 64

    /// Probes may use up to this many times the bytes received (RFC 9000's anti-amplification
    /// factor): the answer to a join often fills the 1:1 budget, and a probe that could not go
    /// would leave it waiting for the device's next keepalive whenever a datagram is lost.
    static let probeAmplificationFactor = 3

    func allows(_ size: Int) -> Bool { validated || sent + size <= received }

    func allowsProbe(_ size: Int) -> Bool { validated || sent + size <= received * PathBudget.probeAmplificationFactor }

    mutating func noteReceived(_ datagram: UnsafeRawBufferPointer, frame: Frame?) {
        received += datagram.count
        guard !validated, let ack = (frame ?? (try? FrameCodec.decode(datagram)))?.ack else { return }
        if sentTimestamps.contains(ack.echoedTimestamp) {
            validated = true
            sentTimestamps = []
        }
    }

    mutating func noteSent(_ datagram: [UInt8]) {
        sent += datagram.count
        guard !validated, let frame = try? FrameCodec.decode(datagram) else { return }
        if sentTimestamps.count == PathBudget.rememberedTimestamps { sentTimestamps.removeFirst() }
        sentTimestamps.append(frame.timestamp)
    }
}
