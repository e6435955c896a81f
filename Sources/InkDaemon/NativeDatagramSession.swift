import InkProtocol
import InkRelay
import InkUV

/// One native device over UDP: a `SealedDatagramSession` (its handshake already answered, then
/// an ARQ session carrying session messages, sealed), one relay session, its deadline in the
/// transport's `SessionTimers`.
///
/// The protocol core decides everything about a datagram once it has opened and decoded it
/// (docs/protocol.md 8.1): what does not open changes nothing; paths move only after a probe of
/// the new address is answered; the amplification limit holds what an unproved address may not
/// have yet. This class keeps the addresses and moves bytes.
final class NativeDatagramSession: RelaySessionTransport, DeadlineWheelMember {
    let connectionID: UInt64
    private(set) var address: SocketAddress {
        didSet { addressText = address.description }
    }
    /// `address` as the status page shows it, made once per address (the page lists every member).
    private var addressText: String
    /// The address being validated, if any.
    private var candidate: SocketAddress?
    private let sealed: SealedDatagramSession
    /// The join the handshake carried, handed to the relay once the session is open.
    private var join: [UInt8]?
    // Held without reference counting: the transport and the daemon outlive every session,
    // and counted references to them (objects with weak references, so every count takes
    // the slow path) cost several atomic operations per datagram.
    private unowned(unsafe) let transport: UDPTransport
    private unowned(unsafe) let daemon: Daemon
    private var session: SessionID?
    /// The whole millisecond this session's deadline is armed for (kept by `SessionTimers`).
    var wheelMilliseconds: UInt64?
    private var flushing = false
    private var flushAgain = false
    private var blocked = false
    /// Set when the relay closed the session: deliver the goodbye, then close.
    private var lingerUntil: UInt64?
    private var ended = false
    private var reportedRetransmissions = 0

    /// Queued bytes above which the relay is told to hold back, and below which to resume.
    static let backpressureHighBytes = 1 << 20
    static let backpressureLowBytes = 256 << 10
    /// How long a closed session keeps retransmitting its goodbye.
    static let lingerMicroseconds: UInt64 = 1_000_000

    init(sealed: SealedDatagramSession, join: [UInt8], address: SocketAddress, transport: UDPTransport) {
        connectionID = sealed.connectionID
        self.sealed = sealed
        self.join = join
        self.address = address
        addressText = address.description
        self.transport = transport
        daemon = transport.daemon
    }

    /// Opens the relay session and hands it the join; the handshake's response goes out first.
    func start() {
        session = daemon.driver.open(self, kind: .udp, confirmed: false, from: address)
        if let session, let join {
            self.join = nil
            daemon.driver.message(join, from: session)
        }
        flush()
    }

    // MARK: input

    /// One datagram, read in place (valid only during this call).
    func receive(_ datagram: UnsafeRawBufferPointer, from peer: SocketAddress) {
        guard !ended else { return }
        let source: PathSource = peer == address ? .current : peer == candidate ? .candidate : .other
        switch sealed.handleDatagram(datagram, from: source, now: Instant(microseconds: daemon.loop.now)) {
        case .accepted:
            break
        case .newCandidate:
            candidate = peer
        case .dropped(let reason):
            transport.countDropped(reason)
            return
        }
        flush()
    }

    // MARK: relay -> device

    var linkStatus: LinkStatus {
        // Until the handshake completes there is no ARQ yet: no RTT or loss to show.
        guard let arq = sealed.arq else { return LinkStatus(address: addressText, sealed: daemon.sealsSessions) }
        return LinkStatus(address: addressText, rttMs: Double(arq.smoothedRTT.microseconds) / 1000,
                          lossPercent: Double(arq.estimatedLoss) * 100 / Double(ARQSession.lossEstimateScale), sealed: daemon.sealsSessions)
    }

    func deliver(_ message: ServerMessage, encoder: inout SharedMessageEncoder) {
        guard !ended else { return }
        do {
            try sealed.send(encoder.encode(message))
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
            while let out = sealed.pollTransmit(now: now) { transmit(out.bytes, toCandidate: out.toCandidate) }
            while !ended, let event = sealed.pollEvent() { handle(event) }
        } while flushAgain && !ended
        flushing = false
        guard !ended else { return }
        if let lingerUntil, sealed.isIdle || daemon.loop.now >= lingerUntil {
            sealed.close()
            let now = Instant(microseconds: daemon.loop.now)
            while let out = sealed.pollTransmit(now: now) { transmit(out.bytes, toCandidate: out.toCandidate) }
            terminate(reason: "closed")
            return
        }
        updateBackpressure()
        armTimer()
    }

    private func handle(_ event: SealedEvent) {
        switch event {
        case .delivered(let message):
            if let session { daemon.driver.message(message, from: session) }
        case .confirmed:
            if let session { daemon.driver.confirmed(session) }
        case .moved:
            if let candidate {
                daemon.logger.info("session moved", ["connection": connectionID, "from": address, "to": candidate])
                address = candidate
                self.candidate = nil
                transport.sessionsChanged()
            }
        case .peerClosed:
            terminate(reason: "device closed the session")
        case .peerUnreachable:
            terminate(reason: "device unreachable")
        case .failed(let error):
            daemon.metrics.errors(kind: "arq_failed").increment()
            terminate(reason: "protocol error: \(error)")
        case .peerReachable, .established, .reset, .notice, .learnedKey:
            break
        }
    }

    private func transmit(_ datagram: [UInt8], toCandidate: Bool) {
        guard let to = toCandidate ? candidate : address else { return }
        transport.send(datagram, to: to)
    }

    private func updateBackpressure() {
        guard let session, let arq = sealed.arq else { return }
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
        var deadline = sealed.pollTimeout()?.microseconds
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
        sealed.handleTimeout(now: Instant(microseconds: daemon.loop.now))
        flush()
    }

    /// Segments held out of order right now.
    var outOfOrderSegments: Int { sealed.arq?.outOfOrderSegments ?? 0 }

    /// RTT sample and new retransmissions (once a housekeeping round), into series the caller
    /// looked up once for every session.
    func sampleMetrics(rtt: HistogramCell, retransmissions: CounterCell) {
        guard let arq = sealed.arq else { return }
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
