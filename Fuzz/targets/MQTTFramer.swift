// MQTT packet framing and the chaos session (Benchmarks/MQTTChaos): neither traps on any byte
// stream; the framer cuts the same packets whether fed at once or in uneven pieces, never
// buffers past one partial packet after draining, and every packet re-frames to its own bytes;
// the session, fed the stream from both sides under chaos, releases at most what it was given.

@_cdecl("LLVMFuzzerTestOneInput")
public func mqttFramerFuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    let maximum = 512
    func cut(_ pieceSizes: (Int) -> Int) -> ([[UInt8]], MQTTFramingError?) {
        var framer = MQTTPacketFramer(maximumPacketBytes: maximum)
        var packets: [[UInt8]] = []
        var offset = 0, step = 0
        while offset < bytes.count {
            let end = min(bytes.count, offset + pieceSizes(step))
            framer.handleBytes(bytes[offset..<end])
            offset = end
            step += 1
            while true {
                let packet: MQTTPacket?
                do { packet = try framer.pollPacket() } catch { return (packets, error) }
                guard let packet else { break }
                guard packet.bytes.count <= maximum else { fatalError("packet over its bound") }
                let reframed = try? MQTTPacketBuilder.packet(firstByte: packet.bytes[0], body: Array(packet.body))
                guard reframed == packet.bytes || packet.headerBytes > 1 + (try! MQTTRemainingLength.encode(packet.body.count)).count else {
                    fatalError("packet does not re-frame to its bytes")
                }
                _ = (packet.packetIdentifier, packet.publishPayload(protocolLevel: 5), packet.connectClientIdentifier, packet.markedDuplicate())
                packets.append(packet.bytes)
            }
            guard framer.bufferedByteCount < maximum else { fatalError("framer buffers past one partial packet") }
        }
        return (packets, nil)
    }
    let whole = cut { _ in Int.max }
    let pieces = cut { $0 % 5 + 1 }
    guard whole.0 == pieces.0, whole.1 == pieces.1 else { fatalError("pieces change the packets") }

    // The session: the first half from the client, the rest from the broker, with every chaos on.
    var session = MQTTChaosSession(configuration: MQTTChaosConfiguration(
        delayMicroseconds: 3, jitterMicroseconds: 50, duplicateChance: 0.3, burstChance: 0.2, maximumBurstLength: 4), runSeed: UInt64(size))
    session.maximumBurstHoldMicroseconds = 100
    let half = bytes.count / 2
    session.handleBytes(Array(bytes[..<half]), from: .client, now: 0)
    session.handleBytes(Array(bytes[half...]), from: .broker, now: 10)
    session.handleEndOfStream(from: .client, now: 20)
    var now: UInt64 = 20
    var rounds = 0
    while let deadline = session.nextDeadline {
        now = max(now, deadline)
        session.handleTimeout(now: now)
        rounds += 1
        guard rounds < 100_000 else { fatalError("session never empties") }
    }
    var written = 0
    while let transmit = session.pollTransmit() {
        if case .bytes(let packet, _) = transmit { written += packet.count }
    }
    // Copies can at most double what came in.
    guard written <= 2 * bytes.count else { fatalError("session wrote more than twice its input") }
    return 0
}
