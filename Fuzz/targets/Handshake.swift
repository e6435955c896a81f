// The sealed sessions' handshake (docs/protocol.md 4.2, 4.5, 4.6), over FakeCrypto (the fuzz
// build has no OpenSSL; the state machines and parsers are the same): any bytes as a
// datagram's initiation, a device's response, notice, key reply or reset, or a stream's first
// messages never trap; a well-sealed initiation around any payload either gives that payload
// back as the join or is refused with a typed failure; and a session made from it answers.

private let crypto = FakeCrypto(seed: 1)
private let staticKey = StaticKeyPair(privateKey: crypto.randomBytes(32), crypto: crypto)
private let reset = StatelessReset(staticPrivateKey: staticKey.privateKey, crypto: crypto)

@_cdecl("LLVMFuzzerTestOneInput")
public func handshakeFuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    guard let mode = bytes.first else { return 0 }
    let body = Array(bytes.dropFirst())
    switch mode % 5 {
    case 0:
        // Any datagram offered as an initiation.
        if case .success(let (session, _)) = SealedDatagramSession.accept(initiation: body, staticKey: staticKey, reset: reset, crypto: crypto, now: .zero) {
            guard session.pollTransmit(now: .zero)?.bytes.first == 0x23 else { fatalError("no response first") }
        }
    case 1:
        // A well-sealed initiation whose join is the input: the daemon gets exactly it back.
        let cid = UInt64(bytes.count) &* 0x9E37_79B9 | 1
        let device = SealedDatagramSession(deviceConnectionID: cid, serverKey: staticKey.publicKey, join: body, crypto: crypto, now: .zero)
        guard let initiation = device.pollTransmit(now: .zero)?.bytes else { return 0 }
        switch SealedDatagramSession.accept(initiation: initiation, staticKey: staticKey, reset: reset, crypto: crypto, now: .zero) {
        case .success(let (daemon, join)):
            guard join == body, let response = daemon.pollTransmit(now: .zero) else { fatalError("join or response lost") }
            device.handleDatagram(response.bytes, now: .zero)
            guard device.isEstablished else { fatalError("the response did not open") }
            _ = try? SessionMessageCodec.decodeClient(join)
        case .failure(let why):
            // Only an initiation too large for a datagram is refused.
            guard why == .malformed, initiation.count > PacketCodec.maxInitiationBytes else { fatalError("refused: \(why)") }
        }
    case 2:
        // Anything a device in its handshake may receive.
        let device = SealedDatagramSession(deviceConnectionID: 7, serverKey: mode & 8 == 0 ? staticKey.publicKey : nil, join: [1, 1, 0],
                                           crypto: crypto, now: .zero)
        _ = device.pollTransmit(now: .zero)
        var packet = body
        if packet.count >= 9 {
            // Aim at this session's connection id half the time.
            if mode & 16 != 0 { for k in 0..<8 { packet[1 + k] = UInt8(truncatingIfNeeded: UInt64(7) >> UInt64(56 - 8 * k)) } }
        }
        device.handleDatagram(packet, now: .milliseconds(1))
        device.handleTimeout(now: .milliseconds(400))
        var n = 0
        while device.pollTransmit(now: .milliseconds(400)) != nil {
            n += 1
            if n > 10 { fatalError("handshake keeps transmitting") }
        }
        while device.pollEvent() != nil {}
    case 3:
        // A stream's first message, then more, at the daemon.
        if case .success(let (stream, _)) = SealedStreamSession.accept(initiation: body, staticKey: staticKey, crypto: crypto, now: .zero) {
            _ = stream.pollMessage()
            try? stream.handleMessage(body, now: .zero)
        }
        _ = SealedStreamSession.isKeyRequest(body)
        _ = PacketCodec.parseNotice(body, streamForm: true)
    default:
        // A device's stream receiving anything.
        let stream = SealedStreamSession(serverKey: mode & 8 == 0 ? staticKey.publicKey : nil, join: [1, 1, 0], crypto: crypto)
        _ = stream.pollMessage()
        try? stream.handleMessage(body, now: .zero)
        while stream.pollEvent() != nil {}
    }
    return 0
}
