import Glibc
import InkCodec
import InkCrypto
import InkProtocol

/// `inkwire-bench sealing [--trace PATH] [--seconds 120]`: what sealing costs on the wire
/// (docs/protocol.md 4.8). A device and a daemon sealed session (OpenSSL), joined by a lossless
/// virtual link with a 10 ms one-way delay, the device drawing the lesson's 60 ms batches at
/// lesson rate and the daemon sending them back as another member's room batches (what a
/// watcher gets), with random 64-bit connection ids as devices pick them. Every datagram is
/// measured as sent; protocol 1 would have framed the same frame in `frame + 5 + varint(cid)`
/// bytes (version/kind, flags, the id, the checksum; no packet number, no tag). Also the join's
/// bytes both ways, and AES-256-GCM's cost per live packet (seal and open, this machine).
func runSealingBench(_ arguments: [String]) -> Never {
    let cli = BenchOptions.read(arguments, command: "sealing", usage: "usage: inkwire-bench sealing [--trace PATH] [--seconds 120]",
                                    options: ["--trace", "--seconds"])
    let tracePath = cli.text("--trace")
    let seconds = cli.integer("--seconds", UInt64(1)...86_400, default: 120)
    let lines: [TraceLine]
    if let tracePath, let text = FanoutDaemon.read(tracePath), let parsed = try? Trace.parse(Array(text.utf8)) {
        lines = parsed
    } else {
        lines = FanoutWorkload.syntheticLines()
    }
    let workload = FanoutWorkload(lines: lines, copies: 1)
    let crypto = OpenSSLCrypto()
    let staticKey = StaticKeyPair(privateKey: crypto.randomBytes(32), crypto: crypto)
    let cid = UInt64.random(in: 1 << 63 ... UInt64.max) >> UInt64.random(in: 0...1)
    let varint = varintSize(cid)
    let joinMessage = SessionMessageCodec.encode(.join(JoinRequest(room: "maths", user: "teacher", role: .teacher, origin: 42)))

    var now = Instant.milliseconds(1000)
    let device = SealedDatagramSession(deviceConnectionID: cid, serverKey: staticKey.publicKey, join: joinMessage, crypto: crypto, now: now)
    var daemon: SealedDatagramSession?
    var inFlight: [(due: Instant, toDaemon: Bool, bytes: [UInt8])] = []
    var sizes: [Bool: [(sealed: Int, frame: Int)]] = [true: [], false: []]
    var joinBytes: [String: Int] = [:]
    func flush() {
        var progress = true
        while progress {
            progress = false
            while let d = device.pollTransmit(now: now) {
                progress = true
                note(d.bytes, toDaemon: true)
                inFlight.append((now + .milliseconds(10), true, d.bytes))
            }
            if let daemon {
                while let d = daemon.pollTransmit(now: now) {
                    progress = true
                    note(d.bytes, toDaemon: false)
                    inFlight.append((now + .milliseconds(10), false, d.bytes))
                }
                while let e = daemon.pollEvent() {
                    progress = true
                    // Each batch goes back as a room batch, as a watcher would get it.
                    if case .delivered(let m) = e, case .batch(let seq, let payload)? = try? SessionMessageCodec.decodeClient(m) {
                        try? daemon.send(SessionMessageCodec.encode(.roomBatch(RoomBatch(roomSeq: seq, author: AuthorID(2), timeMs: 0, payload: payload))))
                    }
                }
            }
            while device.pollEvent() != nil { progress = true }
        }
    }
    func note(_ bytes: [UInt8], toDaemon: Bool) {
        guard let type = PacketCodec.peek(bytes)?.type else { return }
        switch type {
        case .initiation: joinBytes["initiation", default: 0] += bytes.count
        case .response: joinBytes["response", default: 0] += bytes.count
        default:
            if joinBytes["first_packet"] == nil && toDaemon { joinBytes["first_packet"] = bytes.count }
            sizes[toDaemon]!.append((bytes.count, bytes.count - PacketCodec.transportOverhead))
        }
    }
    var codec = BinaryCodecState()
    var next = 0
    var originSeq: UInt64 = 0
    let start = now
    let end = start + .milliseconds(seconds * 1000)
    flush()
    while now < end {
        now = now + .milliseconds(1)
        while next < workload.batches.count, start + .init(microseconds: workload.dueMicroseconds[next]) <= now {
            originSeq += 1
            if let payload = try? BinaryBatchCodec.encode(Batch(author: AuthorID(1), commands: workload.batches[next]), state: &codec) {
                try? device.send(SessionMessageCodec.encode(.batch(originSeq: originSeq, payload: payload)))
            }
            next += 1
        }
        inFlight.sort { $0.due < $1.due }
        while let first = inFlight.first, !(now < first.due) {
            inFlight.removeFirst()
            if first.toDaemon {
                if let daemon {
                    daemon.handleDatagram(first.bytes, now: now)
                } else if case .success(let (d, _)) = SealedDatagramSession.accept(initiation: first.bytes, staticKey: staticKey,
                                                                                   reset: StatelessReset(staticPrivateKey: staticKey.privateKey, crypto: crypto),
                                                                                   crypto: crypto, now: now) {
                    daemon = d
                }
            } else {
                device.handleDatagram(first.bytes, now: now)
            }
        }
        for s in [device] + (daemon.map { [$0] } ?? []) { if let t = s.pollTimeout(), !(now < t) { s.handleTimeout(now: now) } }
        flush()
    }

    // AES-256-GCM per live packet on this machine, for each implementation: hot (one context)
    // and cold (4000 contexts used in turn, as the daemon's 2000 sessions keep them).
    let openssl = OpenSSLCrypto.shared
    var aeadRows: [(name: String, contexts: Int, seal: Double, open: Double)] = []
    let implementations: [(String, ([UInt8]) -> (any PacketAEAD)?)] = [
        ("openssl", { openssl.openSSLAEAD(key: $0) }), ("libsodium", { openssl.sodiumAEAD(key: $0) }),
    ]
    for (name, make) in implementations {
        for contexts in [1, 4000] {
            guard let cost = aeadCost(contexts: contexts, make: { make(crypto.randomBytes(32)) }) else { continue }
            aeadRows.append((name, contexts, cost.seal, cost.open))
        }
    }

    func mean(_ v: [Int]) -> Double { v.isEmpty ? 0 : Double(v.reduce(0, +)) / Double(v.count) }
    print("{\"bench\":\"sealing\",\"connection_id_varint_bytes\":\(varint),\"transport_overhead_bytes\":\(PacketCodec.transportOverhead),"
        + "\"added_per_datagram_bytes\":\(PacketCodec.transportOverhead + 1 - 6 - varint),"
        + "\"join_initiation_bytes\":\(joinBytes["initiation"] ?? 0),\"join_message_bytes\":\(joinMessage.count),"
        + "\"join_response_bytes\":\(joinBytes["response"] ?? 0),\"first_packet_bytes\":\(joinBytes["first_packet"] ?? 0),"
        + "\"protocol1_join_datagram_bytes\":\(protocolOneJoinSize(joinMessage.count, varint)),"
        + "\"aead\":\"\(OpenSSLCrypto.packetAEADName)\"}")
    for row in aeadRows {
        print("{\"bench\":\"sealing-aead\",\"implementation\":\"\(row.name)\",\"contexts\":\(row.contexts),"
            + "\"seal_ns\":\(fanoutFixed(row.seal, 0)),\"open_ns\":\(fanoutFixed(row.open, 0))}")
    }
    for toDaemon in [true, false] {
        let rows = sizes[toDaemon]!
        let sealed = rows.map(\.sealed)
        let v1 = rows.map { $0.frame + 5 + varint }
        print("{\"bench\":\"sealing-datagrams\",\"direction\":\"\(toDaemon ? "device-to-daemon" : "daemon-to-device")\",\"datagrams\":\(rows.count),"
            + "\"mean_sealed_bytes\":\(fanoutFixed(mean(sealed), 2)),\"mean_protocol1_bytes\":\(fanoutFixed(mean(v1), 2)),"
            + "\"added_bytes\":\(fanoutFixed(mean(sealed) - mean(v1), 2)),\"max_sealed_bytes\":\(sealed.max() ?? 0)}")
    }
    print("")
    print("| what | protocol 1 | protocol 2 (sealed) | added |")
    print("| --- | --- | --- | --- |")
    for toDaemon in [true, false] {
        let rows = sizes[toDaemon]!
        let sealed = mean(rows.map(\.sealed)), v1 = mean(rows.map { $0.frame + 5 + varint })
        print("| mean datagram, \(toDaemon ? "device -> daemon" : "daemon -> device") (\(rows.count)) | \(fanoutFixed(v1, 1)) B | \(fanoutFixed(sealed, 1)) B | \(fanoutFixed(sealed - v1, 1)) B |")
    }
    let v1Join = protocolOneJoinSize(joinMessage.count, varint)
    let v2Join = (joinBytes["initiation"] ?? 0) + (joinBytes["response"] ?? 0) + (joinBytes["first_packet"] ?? 0)
    print("| join (device's first datagram; v2: initiation + response + first ping) | \(v1Join) B | \(v2Join) B | \(v2Join - v1Join) B |")
    print("")
    print("| AES-256-GCM, 44-byte frame | contexts | seal ns | open ns |")
    print("| --- | --- | --- | --- |")
    for row in aeadRows { print("| \(row.name) | \(row.contexts) | \(fanoutFixed(row.seal, 0)) | \(fanoutFixed(row.open, 0)) |") }
    exit(0)
}

/// CPU time to seal, then open, a 44-byte frame under a 13-byte header, with `contexts` keys
/// used in turn (a stride through them, so each is cold when used again); nil when `make`
/// has no implementation on this CPU.
private func aeadCost(contexts: Int, make: () -> (any PacketAEAD)?) -> (seal: Double, open: Double)? {
    var aeads: [any PacketAEAD] = []
    for _ in 0..<contexts {
        guard let a = make() else { return nil }
        aeads.append(a)
    }
    let rounds = 200_000
    var header = [UInt8](repeating: 7, count: 13)
    let frame = [UInt8](repeating: 1, count: 44)
    var packets = [[UInt8]](repeating: [UInt8](repeating: 0, count: 60), count: contexts)
    var plain = [UInt8](repeating: 0, count: 44)
    let stride = contexts > 1 ? 7919 : 0
    let t0 = benchThreadCPUSeconds()
    for n in 0..<rounds {
        let k = (n * stride) % contexts
        header[12] = UInt8(truncatingIfNeeded: k)
        header.withUnsafeBytes { h in frame.withUnsafeBytes { f in packets[k].withUnsafeMutableBytes { aeads[k].seal(nonce: UInt64(k), ad: h, plaintext: f, output: $0) } } }
    }
    let t1 = benchThreadCPUSeconds()
    var opened = 0
    for n in 0..<rounds {
        let k = (n * stride) % contexts
        header[12] = UInt8(truncatingIfNeeded: k)
        if header.withUnsafeBytes({ h in packets[k].withUnsafeBytes { p in plain.withUnsafeMutableBytes { aeads[k].open(nonce: UInt64(k), ad: h, ciphertext: p, output: $0) } } }) { opened += 1 }
    }
    let t2 = benchThreadCPUSeconds()
    precondition(opened == rounds, "an AEAD did not open what it sealed")
    return ((t1 - t0) / Double(rounds) * 1e9, (t2 - t1) / Double(rounds) * 1e9)
}

/// Protocol 1's first datagram around a join of `n` bytes: version/kind, flags, the id, the
/// timestamp, the max-ack-delay extension (block length, type, length, a 3-byte value), the
/// segment (number 0, length), the message, the checksum.
private func protocolOneJoinSize(_ n: Int, _ varint: Int) -> Int {
    2 + varint + 4 + 6 + 1 + varintSize(UInt64(n) << 1 | 1) + n + 4
}

private func varintSize(_ v: UInt64) -> Int {
    var n = 1
    var v = v >> 7
    while v != 0 { n += 1; v >>= 7 }
    return n
}

/// This thread's CPU time, seconds.
func benchThreadCPUSeconds() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}
