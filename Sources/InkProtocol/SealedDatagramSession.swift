/// What a sealed session reports, in order.
public enum SealedEvent: Equatable, Sendable {
    /// One session message from the peer, in order.
    case delivered([UInt8])
    case peerUnreachable
    case peerReachable
    /// The peer closed the session (an authenticated close).
    case peerClosed
    /// The peer broke the ARQ protocol; the session stops.
    case failed(ARQError)
    /// Device: the handshake completed; the daemon proved it holds the pinned key.
    case established
    /// Daemon: the device's first transport packet opened: it holds the keys (not a replay).
    case confirmed
    /// Daemon: the candidate address answered its probe; the session's address is now it.
    case moved
    /// Device: a valid stateless reset: the daemon has no such session (it restarted).
    case reset
    /// Device: the daemon's unauthenticated answer to the initiation (advice only).
    case notice(NoticeCode, key: [UInt8])
    /// Device without a pinned key: the key the daemon says it has (unauthenticated).
    case learnedKey([UInt8])
}

/// What became of one received datagram.
public enum DatagramVerdict: Equatable, Sendable {
    /// Used (opened, or a handshake packet acted on).
    case accepted
    /// Opened, the newest so far, from an address that is neither the session's nor its
    /// candidate: the caller makes that address the candidate.
    case newCandidate
    case dropped(DropReason)
}

public enum DropReason: String, Equatable, Sendable {
    /// A transport packet whose tag did not match (forged, corrupted, another session's).
    case unauthenticated
    /// A packet number already opened or older than the replay window.
    case replayed
    /// Opened, but not a frame; or too short to be a packet of its type.
    case malformed
    /// A packet this end does not take now (a second initiation, a reset for a daemon...).
    case unexpected
    /// A reset whose token is not this session's.
    case forgedReset
}

/// Counters of what a sealed session refused or did, for tests and metrics.
public struct SealedStats: Equatable, Sendable {
    public var unauthenticated = 0
    public var replayed = 0
    public var malformed = 0
    public var unexpected = 0
    public var forgedResets = 0
    public var initiationsSent = 0
    public var responsesSent = 0
    /// Datagrams held for an unproved address (the amplification limit).
    public var held = 0
    /// Held datagrams dropped because the hold was full (the ARQ sends their segments again).
    public var heldDropped = 0
    public var keyUpdates = 0
    public init() {}
}

/// A native session over datagrams (docs/protocol.md 4 and 8.1): the Noise NK handshake that
/// carries the join, then an `ARQSession` whose frames travel sealed, with the replay window,
/// key updates, stateless resets and, on the daemon's side, path validation and the
/// amplification limit. Sans IO, like the ARQ: the caller feeds datagrams and time and sends
/// what `pollTransmit` returns (to the session's address, or its candidate's).
///
/// Call order: `handleDatagram` for every datagram of this connection id (with where it came
/// from), `handleTimeout` when `pollTimeout` passes; after any input or `send`, drain
/// `pollTransmit`, then `pollEvent`, then re-arm the timer.
public final class SealedDatagramSession {
    public enum Role: Sendable { case device, daemon }

    /// Datagrams held for an unproved address; more are dropped (the ARQ resends).
    public static let maxHeldDatagrams = 64
    /// Transport packets a device keeps while its handshake has not completed (reordering).
    public static let maxEarlyPackets = 8
    /// Copies of the initiation (or key request) sent at each handshake timeout.
    public static let handshakeCopies = 2

    public let role: Role
    public let connectionID: UInt64
    public let arqConfiguration: ARQConfiguration
    public let sealing: SealingConfiguration
    private let crypto: any SessionCrypto

    private enum Phase {
        /// Device without a pinned key: asking for it.
        case awaitingKey(join: [UInt8])
        case handshaking(NoiseInitiator, initiation: [UInt8])
        case established
        case ended
    }
    private var phase: Phase
    private var keys: TransportKeys?
    public private(set) var arq: ARQSession?
    /// The daemon's static key as pinned or learned (device).
    public private(set) var serverKey: [UInt8]?

    // Device: handshake retransmission.
    private var handshakeDueAt: Instant?
    private var handshakeBackoff: Instant.Duration
    private var copiesOwed = 0
    private var handshakeStartedAt: Instant
    private var reportedHandshakeUnreachable = false
    private var earlyPackets: [[UInt8]] = []
    /// The ARQ timestamp of the first packet of a send phase: an echo at or past it shows the
    /// peer holds that phase (key updates wait for it, `TransportKeys`). A phase entered by
    /// following the peer has none until its first packet goes.
    private var sendPhaseStart: (phase: UInt64, timestamp: UInt32)?
    /// Messages sent before the handshake completed, within the ARQ's queue bounds (so the ARQ
    /// takes them all when it starts).
    private var pending: [[UInt8]] = []
    private var pendingBytes = 0
    private var resetToken: [UInt8]?

    // Daemon: the handshake's answer, the device's proof, the paths.
    private var initiation: [UInt8] = []
    private var response: [UInt8] = []
    private var responseOwed = false
    public private(set) var isConfirmed = false
    private var path = PathValidator()
    private var held = PollQueue<(bytes: [UInt8], toCandidate: Bool)>()

    private var events = PollQueue<SealedEvent>()
    private var counters = SealedStats()

    // MARK: creation

    /// A device's session: sends the initiation carrying `join` (one encoded session message of
    /// kind `join`) first. Without `serverKey` it first asks the daemon for its key (trust on
    /// first use: the caller decides whether to keep it).
    public init(deviceConnectionID connectionID: UInt64, serverKey: [UInt8]?, join: [UInt8], crypto: any SessionCrypto,
                arq: ARQConfiguration = ARQConfiguration(), sealing: SealingConfiguration = SealingConfiguration(), now: Instant,
                ephemeralPrivate: [UInt8]? = nil) {
        role = .device
        self.connectionID = connectionID
        self.crypto = crypto
        arqConfiguration = arq
        self.sealing = sealing
        self.serverKey = serverKey
        handshakeBackoff = SealedDatagramSession.firstHandshakeTimeout(arq)
        handshakeStartedAt = now
        if let serverKey {
            var initiator = NoiseInitiator(crypto: crypto, responderStatic: serverKey, transport: .datagram, connectionID: connectionID,
                                           ephemeralPrivate: ephemeralPrivate)
            if let message = initiator.writeMessage1(payload: join) {
                phase = .handshaking(initiator, initiation: PacketCodec.handshakePacket(.initiation, connectionID: connectionID, message: message))
            } else {
                phase = .ended
                events.append(.failed(.closed))
            }
        } else {
            phase = .awaitingKey(join: join)
        }
        copiesOwed = 1
        handshakeDueAt = now
    }

    /// The first handshake retransmission timeout: the ARQ's first probe timeout (its initial
    /// RTT, a fourfold variance, the ack delay), so a join is retried as it always was.
    static func firstHandshakeTimeout(_ arq: ARQConfiguration) -> Instant.Duration {
        let rto = arq.initialRTT.microseconds + max(1000, 2 * arq.initialRTT.microseconds)
        return Instant.Duration(microseconds: min(max(rto, arq.minRTO.microseconds), arq.maxRTO.microseconds) + arq.maxAckDelay.microseconds)
    }

    /// Why the daemon did not take an initiation.
    public enum AcceptFailure: Error, Equatable, Sendable {
        /// Not an initiation of this protocol, or shorter than one.
        case malformed
        /// It did not open with the daemon's key: answer with a `keyMismatch` notice.
        case keyMismatch
        /// A low-order ephemeral key.
        case badKey
    }

    /// The daemon's session for an initiation: the session (its response is the first thing
    /// `pollTransmit` returns) and the join it carried. Its address budget starts with the
    /// initiation's bytes.
    public static func accept(initiation datagram: [UInt8], staticKey: StaticKeyPair, reset: StatelessReset, crypto: any SessionCrypto,
                              arq: ARQConfiguration = ARQConfiguration(), sealing: SealingConfiguration = SealingConfiguration(),
                              now: Instant, ephemeralPrivate: [UInt8]? = nil) -> Result<(SealedDatagramSession, join: [UInt8]), AcceptFailure> {
        guard datagram.count >= PacketCodec.handshakeHeaderBytes + NoiseHandshake.messageOverhead,
              datagram.count <= PacketCodec.maxInitiationBytes,
              let (type, connectionID) = PacketCodec.peek(datagram), type == .initiation else { return .failure(.malformed) }
        let message = Array(datagram[PacketCodec.handshakeHeaderBytes...])
        guard let opened = NoiseResponder.readMessage1(message, crypto: crypto, staticKey: staticKey,
                                                       transport: .datagram, connectionID: connectionID) else {
            return .failure(.keyMismatch)
        }
        var responder = opened.0
        let join = opened.payload
        guard let (answer, keys) = responder.writeMessage2(payload: reset.token(connectionID: connectionID), ephemeralPrivate: ephemeralPrivate) else {
            return .failure(.badKey)
        }
        let session = SealedDatagramSession(daemonConnectionID: connectionID, keys: keys, crypto: crypto, arq: arq, sealing: sealing, now: now)
        session.initiation = datagram
        session.response = PacketCodec.handshakePacket(.response, connectionID: connectionID, message: answer)
        session.responseOwed = true
        session.path.noteReceived(datagram.count, from: .current)
        return .success((session, join))
    }

    private init(daemonConnectionID connectionID: UInt64, keys: SessionKeys, crypto: any SessionCrypto, arq: ARQConfiguration,
                 sealing: SealingConfiguration, now: Instant) {
        role = .daemon
        self.connectionID = connectionID
        self.crypto = crypto
        arqConfiguration = arq
        self.sealing = sealing
        handshakeBackoff = .zero
        handshakeStartedAt = now
        phase = .established
        self.keys = TransportKeys(keys: keys, crypto: crypto, configuration: sealing, now: now)
        self.arq = ARQSession(configuration: arq, now: now)
    }

    // MARK: application interface

    /// Queues one session message. Before the handshake completes (device) it waits; the ARQ
    /// takes it at once after.
    public func send(_ message: [UInt8]) throws(ARQError) {
        switch phase {
        case .ended: throw .closed
        case .established: try arq!.send(message)
        case .awaitingKey, .handshaking:
            guard message.count <= arqConfiguration.maxMessageSize else {
                throw .messageTooLarge(size: message.count, limit: arqConfiguration.maxMessageSize)
            }
            guard pending.count < arqConfiguration.maxQueuedMessages,
                  pendingBytes + message.count <= arqConfiguration.maxQueuedBytes else { throw .sendQueueFull }
            pending.append(message)
            pendingBytes += message.count
        }
    }

    /// Sends an authenticated close with the next `pollTransmit` (or just ends a handshake).
    public func close() {
        switch phase {
        case .established: arq?.close()
        case .awaitingKey, .handshaking: phase = .ended
        case .ended: break
        }
    }

    public var isEstablished: Bool { if case .established = phase { true } else { false } }
    public var isEnded: Bool { if case .ended = phase { true } else { false } }
    /// Everything sent acknowledged, nothing queued (a goodbye got through).
    public var isIdle: Bool { (arq?.isIdle ?? true) && pending.isEmpty }
    /// Messages and bytes waiting for the handshake (device).
    public var pendingMessages: Int { pending.count }
    public var pendingMessageBytes: Int { pendingBytes }
    public var stats: SealedStats {
        var s = counters
        s.keyUpdates = keys?.updates ?? 0
        return s
    }
    /// The candidate address, if the daemon is validating one (`handleDatagram` with `.candidate`).
    public var hasCandidate: Bool { path.candidate != nil }

    public func pollEvent() -> SealedEvent? {
        if events.isEmpty, let arq {
            // Pull the ARQ's events through, in order.
            while let e = arq.pollEvent() {
                switch e {
                case .delivered(let m): events.append(.delivered(m))
                case .peerUnreachable: events.append(.peerUnreachable)
                case .peerReachable: events.append(.peerReachable)
                case .peerClosed:
                    phase = .ended
                    events.append(.peerClosed)
                case .failed(let error):
                    phase = .ended
                    events.append(.failed(error))
                }
            }
        }
        return events.popFirst()
    }

    // MARK: input

    /// One datagram of this connection id. The daemon says where it came from; a device's
    /// socket is connected, so its datagrams are always `.current`.
    @discardableResult
    public func handleDatagram(_ datagram: [UInt8], from source: PathSource = .current, now: Instant) -> DatagramVerdict {
        datagram.withUnsafeBytes { handleDatagram($0, from: source, now: now) }
    }

    @discardableResult
    public func handleDatagram(_ datagram: UnsafeRawBufferPointer, from source: PathSource = .current, now: Instant) -> DatagramVerdict {
        guard let (type, id) = PacketCodec.peek(datagram), id == connectionID else { return drop(.malformed) }
        switch (type, role) {
        case (.transportPhase0, _), (.transportPhase1, _):
            return handleTransport(datagram, from: source, now: now)
        case (.initiation, .daemon):
            // The device did not get the response: the same initiation, the same answer.
            guard !isConfirmed, datagram.count == initiation.count,
                  initiation.withUnsafeBytes({ $0.elementsEqual(datagram) }) else { return drop(.unexpected) }
            path.noteReceived(datagram.count, from: source == .current ? .current : .other)
            if source == .current { responseOwed = true }
            return .accepted
        case (.response, .device):
            return handleResponse(Array(datagram), now: now)
        case (.reset, .device):
            guard datagram.count == PacketCodec.resetBytes, let token = resetToken else { return drop(.unexpected) }
            guard token.withUnsafeBytes({ $0.elementsEqual(UnsafeRawBufferPointer(rebasing: datagram[9...])) }) else {
                counters.forgedResets += 1
                return .dropped(.forgedReset)
            }
            phase = .ended
            arq = nil
            events.append(.reset)
            return .accepted
        case (.notice, .device):
            guard case .handshaking = phase, let (code, key) = PacketCodec.parseNotice(Array(datagram)) else { return drop(.unexpected) }
            events.append(.notice(code, key: key))
            return .accepted
        case (.keyReply, .device):
            guard case .awaitingKey(let join) = phase, datagram.count == PacketCodec.keyReplyBytes else { return drop(.unexpected) }
            let key = Array(datagram[9...])
            serverKey = key
            events.append(.learnedKey(key))
            var initiator = NoiseInitiator(crypto: crypto, responderStatic: key, transport: .datagram, connectionID: connectionID)
            guard let message = initiator.writeMessage1(payload: join) else { return drop(.malformed) }
            phase = .handshaking(initiator, initiation: PacketCodec.handshakePacket(.initiation, connectionID: connectionID, message: message))
            handshakeBackoff = SealedDatagramSession.firstHandshakeTimeout(arqConfiguration)
            copiesOwed = 1
            handshakeDueAt = now
            return .accepted
        default:
            return drop(.unexpected)
        }
    }

    private func drop(_ reason: DropReason) -> DatagramVerdict {
        switch reason {
        case .unauthenticated: counters.unauthenticated += 1
        case .replayed: counters.replayed += 1
        case .malformed: counters.malformed += 1
        case .unexpected: counters.unexpected += 1
        case .forgedReset: counters.forgedResets += 1
        }
        return .dropped(reason)
    }

    private func handleResponse(_ datagram: [UInt8], now: Instant) -> DatagramVerdict {
        guard case .handshaking(let initiator, _) = phase else { return drop(.unexpected) }
        guard datagram.count >= PacketCodec.handshakeHeaderBytes + NoiseHandshake.messageOverhead,
              let (payload, sessionKeys) = initiator.readMessage2(Array(datagram[PacketCodec.handshakeHeaderBytes...])) else {
            // Not from the daemon holding the pinned key (or damaged): it changes nothing.
            return drop(.unauthenticated)
        }
        guard payload.count == StatelessReset.tokenBytes else { return drop(.malformed) }
        resetToken = payload
        keys = TransportKeys(keys: sessionKeys, crypto: crypto, configuration: sealing, now: now)
        let arq = ARQSession(configuration: arqConfiguration, now: now)
        // The daemon has not seen a packet of ours that opened: prove the session (and this
        // address) at once, and keep pinging until the daemon's frames acknowledge us.
        arq.needsProof = true
        arq.requestPing()
        // Within the queue's bounds by construction (`send`): none is refused.
        for message in pending { try? arq.send(message) }
        pending = []
        pendingBytes = 0
        self.arq = arq
        phase = .established
        handshakeDueAt = nil
        events.append(.established)
        let early = earlyPackets
        earlyPackets = []
        for packet in early { _ = handleDatagram(packet, from: .current, now: now) }
        return .accepted
    }

    private func handleTransport(_ datagram: UnsafeRawBufferPointer, from source: PathSource, now: Instant) -> DatagramVerdict {
        guard datagram.count >= PacketCodec.minTransportBytes else { return drop(.malformed) }
        guard let keys, let arq else {
            if case .handshaking = phase, role == .device, earlyPackets.count < SealedDatagramSession.maxEarlyPackets {
                earlyPackets.append(Array(datagram))
                return .accepted
            }
            return drop(.unexpected)
        }
        let largestBefore = keys.replay.largest
        let count = datagram.count - PacketCodec.transportOverhead
        return withUnsafeTemporaryAllocation(byteCount: max(count, 1), alignment: 8) { plain -> DatagramVerdict in
            let outcome = keys.openDatagram(datagram, now: now, output: plain)
            let number: UInt64
            switch outcome {
            case .replayed: return drop(.replayed)
            case .unauthenticated: return drop(.unauthenticated)
            case .opened(let n, _): number = n
            }
            let frame: Frame
            do { frame = try FrameCodec.decode(UnsafeRawBufferPointer(rebasing: plain[0..<count])) } catch { return drop(.malformed) }
            var verdict = DatagramVerdict.accepted
            if role == .daemon {
                verdict = notePath(source: source, bytes: datagram.count, number: number, largestBefore: largestBefore, frame: frame)
            } else if frame.ack != nil {
                // The daemon's ARQ has received a packet of ours: it holds our address.
                arq.needsProof = false
            }
            if let echo = frame.ack?.echoedTimestamp, !keys.sendPhaseAcknowledged, let start = sendPhaseStart,
               start.phase == keys.sendPhase, SequenceNumber.distance(from: start.timestamp, to: echo) >= 0 {
                keys.sendPhaseAcknowledged = true
            }
            arq.handleFrame(frame, datagramBytes: datagram.count, now: now)
            return verdict
        }
    }

    /// The daemon's path bookkeeping for one opened packet.
    private func notePath(source: PathSource, bytes: Int, number: UInt64, largestBefore: UInt64?, frame: Frame) -> DatagramVerdict {
        if !isConfirmed {
            isConfirmed = true
            events.append(.confirmed)
        }
        switch source {
        case .current:
            path.noteReceived(bytes, from: .current)
            path.validateCurrent()
        case .candidate:
            path.noteReceived(bytes, from: .candidate)
            if path.candidateAnswered(echo: frame.ack?.echoedTimestamp) { events.append(.moved) }
        case .other:
            // Only the newest packet may start a move; an older one just took another path.
            guard largestBefore.map({ number > $0 }) ?? true else { return .accepted }
            path.adoptCandidate(receivedBytes: bytes)
            return .newCandidate
        }
        return .accepted
    }

    public func handleTimeout(now: Instant) {
        switch phase {
        case .awaitingKey, .handshaking:
            if let due = handshakeDueAt, !(now < due) {
                copiesOwed = SealedDatagramSession.handshakeCopies
                handshakeBackoff = min(handshakeBackoff * 2, arqConfiguration.maxRTO)
                handshakeDueAt = now + handshakeBackoff
            }
            if !reportedHandshakeUnreachable, !(now < handshakeStartedAt + arqConfiguration.deadPeerTimeout) {
                reportedHandshakeUnreachable = true
                events.append(.peerUnreachable)
            }
        case .established:
            arq?.handleTimeout(now: now)
        case .ended:
            break
        }
    }

    public func pollTimeout() -> Instant? {
        switch phase {
        case .awaitingKey, .handshaking:
            var t = handshakeDueAt
            if !reportedHandshakeUnreachable {
                let dead = handshakeStartedAt + arqConfiguration.deadPeerTimeout
                t = t.map { min($0, dead) } ?? dead
            }
            return t
        case .established: return arq?.pollTimeout()
        case .ended: return nil
        }
    }

    // MARK: output

    /// The next datagram to send, and whether it goes to the candidate address (daemon).
    public func pollTransmit(now: Instant) -> (bytes: [UInt8], toCandidate: Bool)? {
        switch phase {
        case .ended:
            return nil
        case .awaitingKey:
            guard copiesOwed > 0 else { return nil }
            copiesOwed -= 1
            if handshakeDueAt.map({ !(now < $0) }) ?? false { handshakeDueAt = now + handshakeBackoff }
            return (PacketCodec.keyRequest(connectionID: connectionID), false)
        case .handshaking(_, let initiation):
            guard copiesOwed > 0 else { return nil }
            copiesOwed -= 1
            counters.initiationsSent += 1
            if handshakeDueAt.map({ !(now < $0) }) ?? false { handshakeDueAt = now + handshakeBackoff }
            return (initiation, false)
        case .established:
            return role == .daemon ? pollDaemonTransmit(now: now) : pollSealed(now: now).map { ($0, false) }
        }
    }

    /// The ARQ's next frame, sealed.
    private func pollSealed(now: Instant) -> [UInt8]? {
        guard let arq, let keys, var packet = arq.pollTransmit(now: now, headroom: PacketCodec.transportHeaderBytes,
                                                               tailroom: SessionCryptoSizes.tagBytes) else { return nil }
        seal(&packet, arq: arq, keys: keys, now: now)
        return packet
    }

    private func seal(_ packet: inout [UInt8], arq: ARQSession, keys: TransportKeys, now: Instant) {
        keys.sealDatagram(&packet, connectionID: connectionID, now: now)
        if sendPhaseStart?.phase != keys.sendPhase { sendPhaseStart = (keys.sendPhase, arq.newestSentTimestamp) }
    }

    private func pollDaemonTransmit(now: Instant) -> (bytes: [UInt8], toCandidate: Bool)? {
        if responseOwed, path.allows(response.count, toCandidate: false) {
            responseOwed = false
            counters.responsesSent += 1
            path.noteSent(response.count, toCandidate: false)
            return (response, false)
        }
        if path.probeWanted, let arq, let keys,
           var probe = arq.pollProbe(now: now, headroom: PacketCodec.transportHeaderBytes, tailroom: SessionCryptoSizes.tagBytes) {
            seal(&probe, arq: arq, keys: keys, now: now)
            // Within the candidate's budget, or not at all (its next packet asks again).
            if path.allows(probe.count, toCandidate: true) {
                path.noteProbeSent(timestamp: arq.newestSentTimestamp, size: probe.count)
                return (probe, true)
            }
            path.noteProbeSent(timestamp: arq.newestSentTimestamp, size: 0)
        }
        if let d = held.first, path.allows(d.bytes.count, toCandidate: false) {
            _ = held.popFirst()
            path.noteSent(d.bytes.count, toCandidate: false)
            return d
        }
        while let packet = pollSealed(now: now) {
            if held.isEmpty && path.allows(packet.count, toCandidate: false) {
                path.noteSent(packet.count, toCandidate: false)
                return (packet, false)
            }
            if held.count < SealedDatagramSession.maxHeldDatagrams {
                counters.held += 1
                held.append((packet, false))
            } else {
                counters.heldDropped += 1
            }
        }
        return nil
    }
}
