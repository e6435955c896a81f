/// Why a sealed stream must end (the stream cannot skip a message: the next nonce would be wrong).
public enum SealedStreamError: Error, Equatable, Sendable, CustomStringConvertible {
    /// A message that did not open (forged, corrupted, or another key).
    case unauthenticated
    /// A message of a type this end does not take now, or too short for its type.
    case unexpected(UInt8)
    /// The daemon's static key is not the pinned one (a notice said so, or the response did not open).
    case keyMismatch(presented: [UInt8]?)
    /// The daemon is busy (a notice): try again later.
    case busy

    public var description: String {
        switch self {
        case .unauthenticated: "a sealed message did not open"
        case .unexpected(let b): "unexpected message type 0x\(String(b, radix: 16))"
        case .keyMismatch(let key): "the daemon did not prove the pinned key" + (key.map { " (it presents \(PublicKeyText.encode($0)))" } ?? "")
        case .busy: "the daemon is busy"
        }
    }
}

/// The stream form of a sealed session (docs/protocol.md 4.6): the same handshake and keys as
/// datagrams, one stream message per session message, nonces counted per direction. The caller
/// frames messages (TCP: `[u32 length]`; a WebSocket: one binary message each).
///
/// Call order: `handleMessage` for every stream message received (a thrown error ends the
/// stream), `send` for every session message; after either, drain `pollMessage` (to write) and
/// `pollEvent`.
public final class SealedStreamSession {
    public let role: SealedDatagramSession.Role
    public let sealing: SealingConfiguration
    private let crypto: any SessionCrypto

    private enum Phase {
        case awaitingKey(join: [UInt8])
        case handshaking(NoiseInitiator)
        case established
    }
    private var phase: Phase
    private var keys: TransportKeys?
    private var outgoing = PollQueue<[UInt8]>()
    private var pending: [[UInt8]] = []
    private var events = PollQueue<SealedEvent>()
    public private(set) var serverKey: [UInt8]?
    /// Daemon: the device's first transport message opened (not a replayed initiation).
    public private(set) var isConfirmed = false

    /// The first bytes of a stream that is a protocol 1 session message (a refusal answers it).
    public static func isProtocolOne(firstMessage: [UInt8]) -> Bool { firstMessage.first == SessionMessageCodec.version }

    /// A device's stream: its first message is the initiation carrying `join` (or, without a
    /// pinned key, a key request).
    public init(serverKey: [UInt8]?, join: [UInt8], crypto: any SessionCrypto, sealing: SealingConfiguration = SealingConfiguration(),
                ephemeralPrivate: [UInt8]? = nil) {
        role = .device
        self.crypto = crypto
        self.sealing = sealing
        self.serverKey = serverKey
        if let serverKey {
            phase = .awaitingKey(join: join)
            startHandshake(key: serverKey, join: join, ephemeralPrivate: ephemeralPrivate)
        } else {
            phase = .awaitingKey(join: join)
            outgoing.append([PacketCodec.typeByte(.keyRequest)])
        }
    }

    private func startHandshake(key: [UInt8], join: [UInt8], ephemeralPrivate: [UInt8]? = nil) {
        var initiator = NoiseInitiator(crypto: crypto, responderStatic: key, transport: .stream, connectionID: 0, ephemeralPrivate: ephemeralPrivate)
        guard let message = initiator.writeMessage1(payload: join) else { return }
        phase = .handshaking(initiator)
        outgoing.append([PacketCodec.typeByte(.initiation)] + message)
    }

    /// The daemon's stream for a first message that is an initiation: the session (its response
    /// is the first `pollMessage`) and the join.
    public static func accept(initiation message: [UInt8], staticKey: StaticKeyPair, crypto: any SessionCrypto,
                              sealing: SealingConfiguration = SealingConfiguration(), now: Instant,
                              ephemeralPrivate: [UInt8]? = nil) -> Result<(SealedStreamSession, join: [UInt8]), SealedDatagramSession.AcceptFailure> {
        guard message.count >= 1 + NoiseHandshake.messageOverhead, PacketCodec.type(ofFirstByte: message[0]) == .initiation else {
            return .failure(.malformed)
        }
        guard let opened = NoiseResponder.readMessage1(Array(message[1...]), crypto: crypto, staticKey: staticKey, transport: .stream, connectionID: 0) else {
            return .failure(.keyMismatch)
        }
        var responder = opened.0
        guard let (answer, keys) = responder.writeMessage2(payload: [], ephemeralPrivate: ephemeralPrivate) else { return .failure(.badKey) }
        let session = SealedStreamSession(daemonKeys: keys, crypto: crypto, sealing: sealing, now: now)
        session.outgoing.append([PacketCodec.typeByte(.response)] + answer)
        return .success((session, opened.payload))
    }

    private init(daemonKeys: SessionKeys, crypto: any SessionCrypto, sealing: SealingConfiguration, now: Instant) {
        role = .daemon
        self.crypto = crypto
        self.sealing = sealing
        phase = .established
        keys = TransportKeys(keys: daemonKeys, crypto: crypto, configuration: sealing, now: now, datagrams: false)
    }

    /// The daemon's answer to a first message it cannot accept (then it closes).
    public static func notice(_ code: NoticeCode, key: [UInt8]) -> [UInt8] {
        [PacketCodec.typeByte(.notice), code.rawValue] + key
    }

    /// The daemon's answer to a key request.
    public static func keyReply(key: [UInt8]) -> [UInt8] { [PacketCodec.typeByte(.keyReply)] + key }

    /// Whether a first message is a key request.
    public static func isKeyRequest(_ message: [UInt8]) -> Bool {
        message.count == 1 && PacketCodec.type(ofFirstByte: message[0]) == .keyRequest
    }

    public var isEstablished: Bool { if case .established = phase { true } else { false } }

    /// Queues one session message (sealed now, or once the handshake completes).
    public func send(_ message: [UInt8], now: Instant) {
        guard let keys, isEstablished else {
            pending.append(message)
            return
        }
        outgoing.append(keys.sealStreamMessage(message, now: now))
    }

    /// One received stream message. Session messages come out as `.delivered` events; an empty
    /// transport message (a keepalive) delivers nothing.
    public func handleMessage(_ message: [UInt8], now: Instant) throws(SealedStreamError) {
        guard let first = message.first, let type = PacketCodec.type(ofFirstByte: first) else {
            throw .unexpected(message.first ?? 0)
        }
        switch (type, phase) {
        case (.transportPhase0, .established), (.transportPhase1, .established):
            guard let plain = keys!.openStreamMessage(message, now: now) else { throw .unauthenticated }
            if role == .daemon && !isConfirmed {
                isConfirmed = true
                events.append(.confirmed)
            }
            if !plain.isEmpty { events.append(.delivered(plain)) }
        case (.response, .handshaking(let initiator)):
            guard let (_, sessionKeys) = initiator.readMessage2(Array(message[1...])) else { throw .keyMismatch(presented: nil) }
            keys = TransportKeys(keys: sessionKeys, crypto: crypto, configuration: sealing, now: now, datagrams: false)
            phase = .established
            events.append(.established)
            let queued = pending
            pending = []
            // Confirm at once (an empty keepalive when nothing else waits), then what waited.
            if queued.isEmpty { outgoing.append(keys!.sealStreamMessage([], now: now)) }
            for m in queued { outgoing.append(keys!.sealStreamMessage(m, now: now)) }
        case (.keyReply, .awaitingKey(let join)) where message.count == 1 + SessionCryptoSizes.keyBytes:
            let key = Array(message[1...])
            serverKey = key
            events.append(.learnedKey(key))
            startHandshake(key: key, join: join)
        case (.notice, .handshaking), (.notice, .awaitingKey):
            guard let (code, key) = PacketCodec.parseNotice(message, streamForm: true) else { throw .unexpected(first) }
            // On a stream the daemon closes after a notice: this one ends the attempt.
            events.append(.notice(code, key: key))
            throw code == .busy ? .busy : .keyMismatch(presented: key)
        default:
            throw .unexpected(first)
        }
    }

    /// The next stream message to write (without the TCP length prefix).
    public func pollMessage() -> [UInt8]? {
        return outgoing.popFirst()
    }

    public func pollEvent() -> SealedEvent? {
        return events.popFirst()
    }

    public var keyUpdates: Int { keys?.updates ?? 0 }
}
