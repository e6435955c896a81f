// One ARQ session driven by a hostile peer: the input is a script of application sends, clock
// steps and crafted frames (acks for numbers never sent, huge windows, wild ranges, segments
// far ahead, oversized messages). The session must never trap, never emit a datagram larger
// than its limit, never loop in pollTransmit, and keep every queue within its bound.

private struct Script {
    let bytes: [UInt8]
    var i = 0
    mutating func u8() -> UInt8? {
        guard i < bytes.count else { return nil }
        defer { i += 1 }
        return bytes[i]
    }
    mutating func u32() -> UInt32 {
        var v: UInt32 = 0
        for _ in 0..<4 { v = v << 8 | UInt32(u8() ?? 0) }
        return v
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func arqSessionInputFuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    var script = Script(bytes: Array(UnsafeBufferPointer(start: data, count: size)))
    var config = ARQConfiguration()
    config.maxMessageSize = 4096
    config.maxPendingReceiveBytes = 16_384
    config.maxQueuedBytes = 32_768
    config.receiveWindow = 32
    config.sendWindow = 32
    let s = ARQSession(configuration: config, now: .milliseconds(1000))
    var now = Instant.milliseconds(1000)
    var sentTimestamps: [UInt32] = []
    var lastPeerTimestamp: UInt32 = 1
    func drain() {
        var n = 0
        while let d = s.pollTransmit(now: now) {
            guard d.count <= config.maxDatagramSize, let f = try? FrameCodec.decode(d) else { fatalError("bad datagram") }
            sentTimestamps.append(f.timestamp)
            if sentTimestamps.count > 64 { sentTimestamps.removeFirst() }
            n += 1
            if n > 2000 { fatalError("pollTransmit does not stop") }
        }
        let st = s.stats
        guard st.segmentsInFlight <= Int(config.sendWindow), st.queuedBytes <= config.maxQueuedBytes,
              st.pendingReceiveBytes <= config.maxPendingReceiveBytes + FrameCodec.maxFrameBytes,
              st.outOfOrderSegments <= Int(config.receiveWindow) else { fatalError("bound exceeded: \(st)") }
    }
    while let op = script.u8() {
        switch op % 6 {
        case 0:
            let n = Int(script.u8() ?? 0) * Int(script.u8() ?? 0)
            _ = try? s.send([UInt8](repeating: op, count: n))
        case 1:
            now = now + .milliseconds(UInt64(script.u8() ?? 0) * UInt64(script.u8() ?? 1))
            if let t = s.pollTimeout(), !(now < t) { s.handleTimeout(now: now) }
        case 2, 3:
            let flags = script.u8() ?? 0
            lastPeerTimestamp &+= UInt32(script.u8() ?? 0)
            var f = Frame(timestamp: lastPeerTimestamp, ackNow: flags & 1 != 0)
            if flags & 2 != 0 {
                let pick = Int(script.u8() ?? 0)
                let echo = sentTimestamps.isEmpty || flags & 4 != 0 ? script.u32() : sentTimestamps[pick % sentTimestamps.count]
                let cumulative = SequenceNumber(flags & 8 != 0 ? script.u32() : UInt32(script.u8() ?? 0))
                var ranges: [SequenceRange] = []
                var at = cumulative
                for _ in 0..<Int((script.u8() ?? 0) % 5) {
                    at = at.advanced(by: 1 + UInt32(script.u8() ?? 0) * (flags & 16 != 0 ? 1 << 20 : 1))
                    let r = SequenceRange(start: at, count: 1 + UInt32(script.u8() ?? 0))
                    ranges.append(r)
                    at = r.end
                }
                f.ack = AckBlock(cumulative: cumulative, echoedTimestamp: echo, ackDelay: script.u32() >> ((script.u8() ?? 0) & 31),
                                 window: flags & 32 != 0 ? script.u32() : UInt32(script.u8() ?? 0), ranges: ranges)
            }
            var seq = SequenceNumber(flags & 64 != 0 ? script.u32() : UInt32(script.u8() ?? 0))
            for _ in 0..<Int((script.u8() ?? 0) % 6) {
                let n = Int(script.u8() ?? 0) * (flags & 128 != 0 ? 4 : 1)
                f.segments.append(Segment(sequence: seq, endOfMessage: (script.u8() ?? 0) & 1 != 0, payload: [UInt8](repeating: 1, count: n)))
                seq = seq.advanced(by: 1 + UInt32((script.u8() ?? 0) % 3))
            }
            let bytes = FrameCodec.encode(f)
            if bytes.count <= FrameCodec.maxFrameBytes { s.handleDatagram(bytes, now: now) }
        case 4:
            var raw: [UInt8] = []
            for _ in 0..<Int(script.u8() ?? 0) { raw.append(script.u8() ?? 0) }
            s.handleDatagram(raw, now: now)
        default:
            while s.pollEvent() != nil {}
        }
        drain()
    }
    return 0
}
