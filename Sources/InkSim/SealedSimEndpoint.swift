import InkProtocol

/// A sealed session for the sweep (docs/protocol.md 4): the wire's first endpoint is a device
/// that runs the handshake, the second a daemon that answers it, over `FakeCrypto` seeded from
/// the wire (the same handshake, key phases, replay window and packet sizes as over OpenSSL,
/// deterministically, at simulation speed). Key updates come every few hundred packets, so
/// faults land on them too.
public final class SealedSimEndpoint: SimReliableEndpoint {
    private let spec: SweepSessionSpec
    private let arqConfiguration: ARQConfiguration
    private let sealing: SealingConfiguration
    private let crypto: FakeCrypto
    private let staticKey: StaticKeyPair
    private var session: SealedDatagramSession?
    /// Daemon: batches submitted before the device's initiation arrived.
    private var early: [[UInt8]] = []
    private var earlyBytes = 0
    private var eventStart = 0

    /// What the device's initiation carries (the sweep has no session messages).
    static let join: [UInt8] = [1, 1, 0]

    public init(spec: SweepSessionSpec, arq: ARQConfiguration) {
        self.spec = spec
        arqConfiguration = arq
        var r = SimRandom(seed: spec.wireRandom ^ 0x5EA1_ED00)
        var sealing = SealingConfiguration()
        sealing.rekeyAfterPackets = 50 + r.below(400)
        sealing.rekeyAfter = .milliseconds(2_000 + r.below(8_000))
        self.sealing = sealing
        // Both ends of a wire agree on the daemon's key; each end draws its own ephemerals.
        let keys = FakeCrypto(seed: spec.wireRandom)
        staticKey = StaticKeyPair(privateKey: keys.randomBytes(32), crypto: keys)
        crypto = FakeCrypto(seed: spec.wireRandom ^ (spec.isFirst ? 0x1111 : 0x2222))
        if spec.isFirst {
            session = SealedDatagramSession(deviceConnectionID: spec.connectionID, serverKey: staticKey.publicKey, join: SealedSimEndpoint.join,
                                            crypto: crypto, arq: arq, sealing: sealing, now: spec.now)
        }
    }

    /// The shipped session, sealed.
    public static func shipped(_ spec: SweepSessionSpec) -> SealedSimEndpoint {
        SealedSimEndpoint(spec: spec, arq: ARQConfiguration())
    }

    /// A sealed session with the wire's drawn ARQ tuning (`ARQSession.sweepConfiguration`).
    public static func tuned(_ spec: SweepSessionSpec) -> SealedSimEndpoint {
        SealedSimEndpoint(spec: spec, arq: ARQSession.sweepConfiguration(spec))
    }

    public func handleDatagram(_ datagram: [UInt8], now: Instant) {
        if session == nil, PacketCodec.peek(datagram)?.type == .initiation,
           case .success(let (daemon, _)) = SealedDatagramSession.accept(initiation: datagram, staticKey: staticKey,
                                                                         reset: StatelessReset(staticPrivateKey: staticKey.privateKey, crypto: crypto),
                                                                         crypto: crypto, arq: arqConfiguration, sealing: sealing, now: now) {
            session = daemon
            for batch in early { try? daemon.send(batch) }
            early = []
            earlyBytes = 0
            return
        }
        session?.handleDatagram(datagram, now: now)
    }

    public func handleTimeout(now: Instant) { session?.handleTimeout(now: now) }
    public func pollTransmit(now: Instant) -> [UInt8]? { session?.pollTransmit(now: now)?.bytes }
    public func pollTimeout() -> Instant? { session?.pollTimeout() }

    public func submit(_ batch: [UInt8]) -> SimSubmitResult {
        guard let session else {
            // The daemon end before the handshake: within what its ARQ will take at once.
            guard early.count < arqConfiguration.maxQueuedMessages, earlyBytes + batch.count <= arqConfiguration.maxQueuedBytes else {
                return .backPressure
            }
            early.append(batch)
            earlyBytes += batch.count
            return .accepted
        }
        do {
            try session.send(batch)
            return .accepted
        } catch .sendQueueFull {
            return .backPressure
        } catch {
            return .rejected("\(error)")
        }
    }

    public func nextSessionEvent() -> SimSessionEvent? {
        guard let event = session?.pollEvent() else { return nil }
        switch event {
        case .delivered(let batch): return .delivered(batch)
        case .peerUnreachable: return .peerUnreachable
        case .failed(let error): return .failed("\(error)")
        case .reset: return .failed("reset")
        default: return .other("\(event)")
        }
    }

    public var memoryUse: [SimMemoryUse] {
        guard let arq = session?.arq else {
            let pending = session?.pendingMessageBytes ?? earlyBytes
            return [SimMemoryUse(name: "send queue bytes (before the handshake)", used: pending, limit: arqConfiguration.maxQueuedBytes)]
        }
        return arq.memoryUse
    }

    /// Key updates this end took part in.
    public var keyUpdates: Int { session?.stats.keyUpdates ?? 0 }

    /// What the sealing refused and did, for a replayed seed.
    public var sealedSummary: String {
        guard let s = session?.stats else { return "no session" }
        return "key updates \(s.keyUpdates), unauthenticated \(s.unauthenticated), replayed \(s.replayed), malformed \(s.malformed), "
            + "unexpected \(s.unexpected), initiations \(s.initiationsSent), responses \(s.responsesSent), held \(s.held)"
    }
}
