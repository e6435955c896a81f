/// Tunables of a sealed session's keys (docs/protocol.md 4.4). Tests shorten them.
public struct SealingConfiguration: Sendable, Equatable {
    /// Packets (or stream messages) sent in one key phase after which this end updates keys.
    /// AES-GCM stays far inside its bounds: RFC 9001 allows 2^23 packets per key.
    public var rekeyAfterPackets: UInt64 = 1 << 20
    /// Age of a key phase after which this end updates keys (old traffic stays secret if a
    /// later key leaks: keys are derived one way).
    public var rekeyAfter = Instant.Duration.milliseconds(120_000)
    /// How long the previous phase's receive key opens late packets after an update.
    public var previousKeyRetention = Instant.Duration.milliseconds(6_000)

    public init() {}
}

/// What opening a transport packet found.
enum OpenOutcome: Equatable {
    /// The packet opened: its full packet number and plaintext length.
    case opened(packetNumber: UInt64, count: Int)
    /// Older than the replay window, or seen: not tried.
    case replayed
    /// The tag did not match any key it could be for.
    case unauthenticated
}

/// The keys of one established session, both directions, across key phases; packet numbers
/// and the replay window of datagrams, message counters of streams.
final class TransportKeys {
    let configuration: SealingConfiguration
    private let crypto: any SessionCrypto

    // Sending.
    private var sendKey: [UInt8]
    private var sendAEAD: any PacketAEAD
    private(set) var sendPhase: UInt64 = 0
    private var sentInPhase: UInt64 = 0
    private var sendPhaseStartedAt: Instant
    /// The next packet number (datagrams) or message counter (streams) to send.
    private(set) var nextSendNumber: UInt64 = 0
    /// Datagrams: the peer has acknowledged a packet of the current send phase (the caller
    /// sets it from the ARQ's echoes). A datagram end updates again only then (RFC 9001 6.2's
    /// rule): with every packet of a phase lost, the peer could not tell the next from the one
    /// before. Streams deliver everything in order and need no such proof.
    var sendPhaseAcknowledged = false
    private let datagramRules: Bool

    // Receiving.
    private var receiveKey: [UInt8]
    private var receiveAEAD: any PacketAEAD
    private(set) var receivePhase: UInt64 = 0
    /// A packet of `receivePhase` has opened (the peer holds this phase's keys).
    private var openedInReceivePhase = false
    /// The smallest packet number opened in `receivePhase` (older ones of the other phase bit
    /// belong to the previous phase).
    private var firstInReceivePhase: UInt64 = 0
    private var previousReceive: (aead: any PacketAEAD, until: Instant)?
    private var nextReceive: (key: [UInt8], aead: any PacketAEAD)?
    /// The next message counter expected on a stream.
    private var nextReceiveNumber: UInt64 = 0
    private(set) var replay = ReplayWindow()
    /// Key updates this end started or followed (statistics).
    private(set) var updates = 0

    init(keys: SessionKeys, crypto: any SessionCrypto, configuration: SealingConfiguration, now: Instant, datagrams: Bool = true) {
        datagramRules = datagrams
        self.crypto = crypto
        self.configuration = configuration
        sendKey = keys.send
        sendAEAD = crypto.aead(key: keys.send)
        receiveKey = keys.receive
        receiveAEAD = crypto.aead(key: keys.receive)
        sendPhaseStartedAt = now
    }

    /// Noise's default REKEY: the first 32 bytes of ENCRYPT(k, 2^64 - 1, empty, 32 zeros).
    static func rekey(_ aead: any PacketAEAD) -> [UInt8] {
        Array(aead.seal(nonce: UInt64.max, ad: [], plaintext: [UInt8](repeating: 0, count: 32))[0..<32])
    }

    /// Starts a key update when this phase is spent, once the peer has shown it holds it.
    private func updateSendPhaseIfDue(now: Instant) {
        guard sentInPhase >= configuration.rekeyAfterPackets || !(now < sendPhaseStartedAt + configuration.rekeyAfter) else { return }
        guard receivePhase == sendPhase, openedInReceivePhase, !datagramRules || sendPhaseAcknowledged else { return }
        advanceSendPhase(now: now)
    }

    private func advanceSendPhase(now: Instant) {
        sendKey = TransportKeys.rekey(sendAEAD)
        sendAEAD = crypto.aead(key: sendKey)
        sendPhase += 1
        sentInPhase = 0
        sendPhaseStartedAt = now
        sendPhaseAcknowledged = false
        updates += 1
    }

    private func nextReceiveKeys() -> (key: [UInt8], aead: any PacketAEAD) {
        if let n = nextReceive { return n }
        let key = TransportKeys.rekey(receiveAEAD)
        let n = (key, crypto.aead(key: key))
        nextReceive = n
        return n
    }

    /// The receive phase moves on (a packet of the next phase opened at `first`); this end's
    /// sending follows if it has not updated itself.
    private func advanceReceivePhase(first: UInt64, now: Instant) {
        let n = nextReceiveKeys()
        previousReceive = (receiveAEAD, now + configuration.previousKeyRetention)
        receiveKey = n.key
        receiveAEAD = n.aead
        nextReceive = nil
        receivePhase += 1
        firstInReceivePhase = first
        if sendPhase < receivePhase { advanceSendPhase(now: now) }
    }

    // MARK: datagrams

    /// Seals `packet` in place: its first 13 bytes are room for the header, then the frame;
    /// the tag is appended.
    func sealDatagram(_ packet: inout [UInt8], connectionID: UInt64, now: Instant) {
        updateSendPhaseIfDue(now: now)
        let number = nextSendNumber
        nextSendNumber += 1
        sentInPhase += 1
        let frameEnd = packet.count
        packet.append(contentsOf: repeatElement(0, count: SessionCryptoSizes.tagBytes))
        let aead = sendAEAD
        let phase = sendPhase
        packet.withUnsafeMutableBytes { b in
            b[0] = PacketCodec.typeByte(.transport(phase: phase))
            PacketCodec.storeU64(connectionID, b, at: 1)
            PacketCodec.storeU32(UInt32(truncatingIfNeeded: number), b, at: 9)
            let header = UnsafeRawBufferPointer(rebasing: b[0..<PacketCodec.transportHeaderBytes])
            let frame = UnsafeRawBufferPointer(rebasing: b[PacketCodec.transportHeaderBytes..<frameEnd])
            let output = UnsafeMutableRawBufferPointer(rebasing: b[PacketCodec.transportHeaderBytes...])
            aead.seal(nonce: number, ad: header, plaintext: frame, output: output)
        }
    }

    /// Opens a transport datagram (already known to be one, at least `minTransportBytes`) into
    /// `output` (room for `count - 29` bytes).
    func openDatagram(_ packet: UnsafeRawBufferPointer, now: Instant, output: UnsafeMutableRawBufferPointer) -> OpenOutcome {
        let phaseBit = UInt64(packet[0] & 1)
        let truncated = PacketCodec.readU32(packet, at: 9)
        let number = PacketCodec.reconstructPacketNumber(truncated: truncated, expected: replay.next)
        guard replay.isFresh(number) else { return .replayed }
        if let p = previousReceive, !(now < p.until) { previousReceive = nil }
        let header = UnsafeRawBufferPointer(rebasing: packet[0..<PacketCodec.transportHeaderBytes])
        let sealed = UnsafeRawBufferPointer(rebasing: packet[PacketCodec.transportHeaderBytes...])
        let count = sealed.count - SessionCryptoSizes.tagBytes
        if phaseBit == receivePhase & 1 {
            guard receiveAEAD.open(nonce: number, ad: header, ciphertext: sealed, output: output) else { return .unauthenticated }
            openedInReceivePhase = true
            if number < firstInReceivePhase { firstInReceivePhase = number }
        } else if number < firstInReceivePhase, receivePhase > 0 {
            guard let p = previousReceive, p.aead.open(nonce: number, ad: header, ciphertext: sealed, output: output) else { return .unauthenticated }
        } else {
            guard nextReceiveKeys().aead.open(nonce: number, ad: header, ciphertext: sealed, output: output) else { return .unauthenticated }
            advanceReceivePhase(first: number, now: now)
            openedInReceivePhase = true
        }
        replay.mark(number)
        return .opened(packetNumber: number, count: count)
    }

    // MARK: streams

    /// One sealed stream message: `20|phase || ENCRYPT(key, counter, type byte, message)`.
    func sealStreamMessage(_ message: [UInt8], now: Instant) -> [UInt8] {
        updateSendPhaseIfDue(now: now)
        let number = nextSendNumber
        nextSendNumber += 1
        sentInPhase += 1
        var out = [UInt8](repeating: 0, count: 1 + message.count + SessionCryptoSizes.tagBytes)
        out[0] = PacketCodec.typeByte(.transport(phase: sendPhase))
        let aead = sendAEAD
        out.withUnsafeMutableBytes { b in
            message.withUnsafeBytes { m in
                aead.seal(nonce: number, ad: UnsafeRawBufferPointer(rebasing: b[0..<1]), plaintext: m,
                          output: UnsafeMutableRawBufferPointer(rebasing: b[1...]))
            }
        }
        return out
    }

    /// The session message inside a sealed stream message, or nil when it does not open.
    func openStreamMessage(_ message: [UInt8], now: Instant) -> [UInt8]? {
        guard message.count >= 1 + SessionCryptoSizes.tagBytes else { return nil }
        let number = nextReceiveNumber
        let phaseBit = UInt64(message[0] & 1)
        var plain = [UInt8](repeating: 0, count: message.count - 1 - SessionCryptoSizes.tagBytes)
        let next = phaseBit != receivePhase & 1
        let aead = next ? nextReceiveKeys().aead : receiveAEAD
        let ok = message.withUnsafeBytes { m in
            plain.withUnsafeMutableBytes { p in
                aead.open(nonce: number, ad: UnsafeRawBufferPointer(rebasing: m[0..<1]),
                          ciphertext: UnsafeRawBufferPointer(rebasing: m[1...]), output: p)
            }
        }
        guard ok else { return nil }
        nextReceiveNumber += 1
        if next {
            advanceReceivePhase(first: number, now: now)
            // A stream never reorders: nothing is late.
            previousReceive = nil
        }
        openedInReceivePhase = true
        return plain
    }
}
