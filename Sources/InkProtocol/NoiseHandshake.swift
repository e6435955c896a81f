/// The two messages of `Noise_NK_25519_AESGCM_SHA256` (docs/protocol.md 4.2): the device
/// (initiator) knows the daemon's static key beforehand; `-> e, es` carries the join, `<- e, ee`
/// the daemon's answer. Sans IO: ephemeral keys come from the caller's `SessionCrypto` (or are
/// given, for vectors).
///
/// A message here is `e.pub || EncryptAndHash(payload)`; `PacketCodec` puts the packet's type
/// byte (and, on datagrams, the connection id) in front.
public enum NoiseHandshake {
    /// Bytes a message adds to its payload: the ephemeral key and the tag.
    public static let messageOverhead = SessionCryptoSizes.keyBytes + SessionCryptoSizes.tagBytes

    /// Which framing the session runs over; part of the prologue.
    public enum Transport: UInt8, Sendable {
        case datagram = 0
        case stream = 1
    }

    /// `"inkwire" || 02 || transport || cid:u64`: binds the protocol version, the transport and
    /// the connection id into the handshake hash.
    static func prologue(transport: Transport, connectionID: UInt64) -> [UInt8] {
        var p = Array("inkwire".utf8)
        p.append(PacketCodec.version)
        p.append(transport.rawValue)
        for shift in stride(from: 56, through: 0, by: -8) { p.append(UInt8(truncatingIfNeeded: connectionID >> UInt64(shift))) }
        return p
    }

    static func initialState(crypto: any SessionCrypto, responderStatic: [UInt8], transport: Transport, connectionID: UInt64) -> NoiseSymmetricState {
        var state = NoiseSymmetricState(crypto: crypto)
        state.mixHash(prologue(transport: transport, connectionID: connectionID))
        state.mixHash(responderStatic)
        return state
    }
}

/// The keys a completed handshake gives one end.
public struct SessionKeys: Sendable, Equatable {
    /// Seals what this end sends (phase 0).
    public var send: [UInt8]
    /// Opens what the peer sends (phase 0).
    public var receive: [UInt8]
    /// The final handshake hash (the same at both ends).
    public var handshakeHash: [UInt8]
}

/// The device's half.
public struct NoiseInitiator {
    private var state: NoiseSymmetricState
    private let crypto: any SessionCrypto
    private let ephemeralPrivate: [UInt8]
    public let ephemeralPublic: [UInt8]

    public init(crypto: any SessionCrypto, responderStatic: [UInt8], transport: NoiseHandshake.Transport, connectionID: UInt64,
                ephemeralPrivate: [UInt8]? = nil) {
        self.crypto = crypto
        state = NoiseHandshake.initialState(crypto: crypto, responderStatic: responderStatic, transport: transport, connectionID: connectionID)
        self.ephemeralPrivate = ephemeralPrivate ?? crypto.randomBytes(SessionCryptoSizes.keyBytes)
        ephemeralPublic = crypto.x25519PublicKey(privateKey: self.ephemeralPrivate)
        responderStaticKey = responderStatic
    }

    private let responderStaticKey: [UInt8]

    /// `-> e, es` with `payload`; nil when the responder's static key is unusable.
    public mutating func writeMessage1(payload: [UInt8]) -> [UInt8]? {
        state.mixHash(ephemeralPublic)
        guard let es = crypto.x25519(privateKey: ephemeralPrivate, publicKey: responderStaticKey) else { return nil }
        state.mixKey(es)
        return ephemeralPublic + state.encryptAndHash(payload)
    }

    /// `<- e, ee`: the responder's payload and the session's keys, or nil when the message
    /// does not open (another key, forged, corrupted).
    public func readMessage2(_ message: [UInt8]) -> (payload: [UInt8], keys: SessionKeys)? {
        guard message.count >= NoiseHandshake.messageOverhead else { return nil }
        var s = state
        let re = Array(message[0..<32])
        s.mixHash(re)
        guard let ee = crypto.x25519(privateKey: ephemeralPrivate, publicKey: re) else { return nil }
        s.mixKey(ee)
        guard let payload = s.decryptAndHash(Array(message[32...])) else { return nil }
        let (i2r, r2i) = s.split()
        return (payload, SessionKeys(send: i2r, receive: r2i, handshakeHash: s.h))
    }
}

/// The daemon's half.
public struct NoiseResponder {
    private var state: NoiseSymmetricState
    private let crypto: any SessionCrypto
    private let initiatorEphemeral: [UInt8]

    /// `-> e, es` read with the daemon's static key: the responder and the initiator's payload,
    /// or nil when the message does not open (the device used another key, or forged it).
    public static func readMessage1(_ message: [UInt8], crypto: any SessionCrypto, staticKey: StaticKeyPair,
                                    transport: NoiseHandshake.Transport, connectionID: UInt64) -> (NoiseResponder, payload: [UInt8])? {
        guard message.count >= NoiseHandshake.messageOverhead else { return nil }
        var state = NoiseHandshake.initialState(crypto: crypto, responderStatic: staticKey.publicKey, transport: transport, connectionID: connectionID)
        let re = Array(message[0..<32])
        state.mixHash(re)
        guard let es = crypto.x25519(privateKey: staticKey.privateKey, publicKey: re) else { return nil }
        state.mixKey(es)
        guard let payload = state.decryptAndHash(Array(message[32...])) else { return nil }
        return (NoiseResponder(state: state, crypto: crypto, initiatorEphemeral: re), payload)
    }

    private init(state: NoiseSymmetricState, crypto: any SessionCrypto, initiatorEphemeral: [UInt8]) {
        self.state = state
        self.crypto = crypto
        self.initiatorEphemeral = initiatorEphemeral
    }

    /// `<- e, ee` with `payload`, and the session's keys; nil when the initiator's ephemeral key
    /// is unusable (a low-order point).
    public mutating func writeMessage2(payload: [UInt8], ephemeralPrivate: [UInt8]? = nil) -> (message: [UInt8], keys: SessionKeys)? {
        let e = ephemeralPrivate ?? crypto.randomBytes(SessionCryptoSizes.keyBytes)
        let ePublic = crypto.x25519PublicKey(privateKey: e)
        state.mixHash(ePublic)
        guard let ee = crypto.x25519(privateKey: e, publicKey: initiatorEphemeral) else { return nil }
        state.mixKey(ee)
        let message = ePublic + state.encryptAndHash(payload)
        let (i2r, r2i) = state.split()
        return (message, SessionKeys(send: r2i, receive: i2r, handshakeHash: state.h))
    }
}
