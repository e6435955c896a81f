// Transport packets of established sealed sessions (docs/protocol.md 4.3, 4.4, 4.7, 8.1), over
// FakeCrypto (the fuzz build has no OpenSSL; the code paths are the same). The fuzzer holds each
// session's peer keys (it ran the other half of each handshake by hand), so besides raw
// datagrams from any address it sends *authentic* packets: arbitrary frame bytes sealed under
// chosen packet numbers and key phases, to a daemon session and to a device session. Nothing
// traps, no datagram exceeds the limit, an unproved address never gets more than three times
// what it sent, pollTransmit always stops, and queues stay bounded.

private let crypto = FakeCrypto(seed: 2)
private let staticKey = StaticKeyPair(privateKey: crypto.randomBytes(32), crypto: crypto)
private let resets = StatelessReset(staticPrivateKey: staticKey.privateKey, crypto: crypto)

private struct Script {
    let bytes: [UInt8]
    var i = 0
    mutating func u8() -> UInt8? {
        guard i < bytes.count else { return nil }
        defer { i += 1 }
        return bytes[i]
    }
    mutating func take(_ n: Int) -> [UInt8] {
        var out: [UInt8] = []
        while out.count < n, let b = u8() { out.append(b) }
        return out
    }
}

/// Seals `frame` like a peer holding `keys`, with the packet number pushed ahead by `skip`.
private func seal(_ frame: [UInt8], _ keys: TransportKeys, skip: Int, cid: UInt64, now: Instant) -> [UInt8] {
    var scratch = [UInt8](repeating: 0, count: PacketCodec.transportHeaderBytes + 5)
    for _ in 0..<skip { keys.sealDatagram(&scratch, connectionID: cid, now: now); scratch.removeLast(16) }
    var packet = [UInt8](repeating: 0, count: PacketCodec.transportHeaderBytes) + frame
    keys.sealDatagram(&packet, connectionID: cid, now: now)
    return packet
}

@_cdecl("LLVMFuzzerTestOneInput")
public func sealedPacketFuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    var script = Script(bytes: Array(UnsafeBufferPointer(start: data, count: size)))
    var sealing = SealingConfiguration()
    sealing.rekeyAfterPackets = 3
    var now = Instant.milliseconds(1)

    // A daemon session, from an initiation the fuzzer made by hand.
    var initiator = NoiseInitiator(crypto: crypto, responderStatic: staticKey.publicKey, transport: .datagram, connectionID: 42,
                                   ephemeralPrivate: Array(repeating: 3, count: 32))
    let initiation = PacketCodec.handshakePacket(.initiation, connectionID: 42, message: initiator.writeMessage1(payload: [1, 1, 0])!)
    guard case .success(let (daemon, _)) = SealedDatagramSession.accept(initiation: initiation, staticKey: staticKey, reset: resets, crypto: crypto,
                                                                        sealing: sealing, now: now, ephemeralPrivate: Array(repeating: 5, count: 32)),
          let response = daemon.pollTransmit(now: now),
          let (_, asDevice) = initiator.readMessage2(Array(response.bytes[9...])) else { fatalError("daemon handshake") }
    let toDaemon = TransportKeys(keys: asDevice, crypto: crypto, configuration: sealing, now: now)

    // A device session, answered by hand.
    let device = SealedDatagramSession(deviceConnectionID: 43, serverKey: staticKey.publicKey, join: [1, 1, 0], crypto: crypto,
                                       sealing: sealing, now: now, ephemeralPrivate: Array(repeating: 7, count: 32))
    guard let deviceInitiation = device.pollTransmit(now: now)?.bytes,
          var (responder, _) = NoiseResponder.readMessage1(Array(deviceInitiation[9...]), crypto: crypto, staticKey: staticKey,
                                                           transport: .datagram, connectionID: 43),
          let (answer, asDaemon) = responder.writeMessage2(payload: resets.token(connectionID: 43), ephemeralPrivate: Array(repeating: 9, count: 32)) else {
        fatalError("device handshake")
    }
    device.handleDatagram(PacketCodec.handshakePacket(.response, connectionID: 43, message: answer), now: now)
    guard device.isEstablished else { fatalError("device not established") }
    let toDevice = TransportKeys(keys: asDaemon, crypto: crypto, configuration: sealing, now: now)

    var receivedElsewhere = initiation.count
    var sentElsewhere = 0
    func drain() {
        var n = 0
        for s in [daemon, device] {
            while let d = s.pollTransmit(now: now) {
                guard d.bytes.count <= PacketCodec.maxDatagramBytes else { fatalError("datagram too large") }
                if d.toCandidate { sentElsewhere += d.bytes.count }
                n += 1
                if n > 5000 { fatalError("pollTransmit does not stop") }
            }
            while s.pollEvent() != nil {}
            if let st = s.arq?.stats, st.queuedBytes > s.arqConfiguration.maxQueuedBytes { fatalError("queue bound") }
        }
        guard sentElsewhere <= 3 * receivedElsewhere else { fatalError("an unproved address got more than three times what it sent") }
    }
    drain()
    while let op = script.u8() {
        let source: PathSource = op & 8 != 0 ? .current : op & 16 != 0 ? .candidate : .other
        switch op % 6 {
        case 0:
            let raw = script.take(Int(script.u8() ?? 0) * 4)
            if source != .current { receivedElsewhere += raw.count }
            _ = daemon.handleDatagram(raw, from: source, now: now)
        case 1:
            device.handleDatagram(script.take(Int(script.u8() ?? 0) * 4), now: now)
        case 2:
            let packet = seal(script.take(Int(script.u8() ?? 0) * 2), toDaemon, skip: Int((script.u8() ?? 0) % 8), cid: 42, now: now)
            if source != .current { receivedElsewhere += packet.count }
            _ = daemon.handleDatagram(packet, from: source, now: now)
        case 3:
            let packet = seal(script.take(Int(script.u8() ?? 0) * 2), toDevice, skip: Int((script.u8() ?? 0) % 8), cid: 43, now: now)
            device.handleDatagram(packet, now: now)
        case 4:
            let message = script.take(Int(script.u8() ?? 0) * 8)
            try? device.send(message)
            try? daemon.send(message)
        default:
            now = now + .milliseconds(UInt64(script.u8() ?? 0) * 20)
            for s in [daemon, device] { if let t = s.pollTimeout(), !(now < t) { s.handleTimeout(now: now) } }
        }
        drain()
    }
    return 0
}
