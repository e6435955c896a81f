import Glibc
import InkClient
import InkCodec
import InkProtocol
import InkRelay
import InkSim

/// `inkwire-bench sync --points N [--loss-percent P] [--rtt-ms R] [--seed S] [--mode daemon|sim|daemon-link]`:
/// a late joiner syncing a board of N points (docs/protocol.md 6). The room is filled first
/// (not timed); then a fresh client is timed from its join to the sync done with the digest
/// checked. Loss > 0 runs in the simulator (relay and client cores over an `InkSim` network in
/// virtual time: both virtual and wall seconds are reported); 0 % runs through the real
/// `inkwired` on loopback (plain loopback: no RTT can be added there). `--mode daemon-link`
/// puts `inkwire-bench link` (loss, RTT/2 each way) between the late viewer and the daemon.
func runSyncBench(_ arguments: [String]) -> Never {
    let cli = BenchOptions.read(arguments, command: "sync", usage: """
        usage: inkwire-bench sync [--points 1000000] [--loss-percent 0] [--rtt-ms 20] [--seed 1]
          [--mode daemon|daemon-link|sim]   (default: daemon at 0 % loss, sim otherwise)
        """, options: ["--points", "--loss-percent", "--rtt-ms", "--seed", "--mode"])
    let points = cli.integer("--points", 1...100_000_000, default: 1_000_000)
    let lossPercent = cli.integer("--loss-percent", 0...100, default: 0)
    let rttMs = cli.integer("--rtt-ms", 0...10_000, default: 20)
    let seed = cli.integer("--seed", UInt64(0)...UInt64.max, default: 1)
    let explicitMode = cli.text("--mode")
    if let explicitMode, !["daemon", "daemon-link", "sim"].contains(explicitMode) { cli.fail("--mode takes daemon, daemon-link or sim, got '\(explicitMode)'") }
    let mode = explicitMode ?? (lossPercent > 0 ? "sim" : "daemon")
    let batches = syncBenchBoard(points: points)
    let result: SyncBenchResult
    if mode == "sim" {
        result = syncBenchSimulated(batches, lossPercent: lossPercent, rttMs: rttMs, seed: seed)
    } else if mode == "daemon-link" {
        result = syncBenchDaemon(batches, link: (lossPercent, rttMs, seed))
    } else {
        result = syncBenchDaemon(batches)
    }
    let json: [(String, String)] = [
        ("bench", "\"sync\""), ("mode", "\"\(mode)\""), ("points", "\(points)"), ("loss_percent", "\(lossPercent)"),
        ("rtt_ms", "\(mode == "daemon" ? 0 : rttMs)"), ("seconds", fixed(result.seconds)), ("wall_seconds", fixed(result.wallSeconds)),
        ("bytes", "\(result.bytes)"), ("datagrams", "\(result.datagrams)"), ("retransmissions", "\(result.retransmissions)"),
        ("digest_ok", result.digestOK ? "true" : "false"), ("seed", "\(seed)"),
    ] + result.detail
    print("{" + json.map { "\"\($0.0)\":\($0.1)" }.joined(separator: ",") + "}")
    print("")
    print("| mode | points | loss % | rtt ms | seconds | wall s | bytes | digest |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    print("| \(mode) | \(points) | \(lossPercent) | \(mode == "daemon" ? 0 : rttMs) | \(fixed(result.seconds)) | \(fixed(result.wallSeconds)) | \(result.bytes) | \(result.digestOK ? "ok" : "MISMATCH") |")
    exit(result.digestOK ? 0 : 1)
}

struct SyncBenchResult {
    /// Join to sync done: virtual seconds in the simulator, wall seconds through the daemon.
    var seconds: Double
    var wallSeconds: Double
    /// Bytes the joiner received (datagrams from the relay).
    var bytes: Int
    var datagrams: Int
    var retransmissions: Int
    var digestOK: Bool
    /// Extra JSON fields (daemon-link: both ends' ARQ figures, the proxy's and the kernel's drops).
    var detail: [(String, String)] = []
}

private func fixed(_ v: Double) -> String {
    let scaled = (v * 1000).rounded() / 1000
    return "\(scaled)"
}

/// Wall-clock seconds (monotonic).
func syncBenchClock() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}

/// Strokes of 100 points in batches of 10 strokes, a pen change per stroke: a board of
/// `points` points as one author would send it live.
func syncBenchBoard(points: Int) -> [[TimedCommand]] {
    var batches: [[TimedCommand]] = []
    var current: [TimedCommand] = []
    var t: UInt64 = 0
    var stroke: UInt32 = 0
    var made = 0
    while made < points {
        stroke += 1
        current.append(TimedCommand(timeMs: t, command: .penStyle(PenStyle(color: UInt8(stroke % 5), width: UInt8(1 + stroke % 3))!)))
        let n = min(100, points - made)
        for p in 0..<n {
            let phase: StrokePhase = p == 0 ? .start : (p == n - 1 ? .end : .move)
            let x = Int32(truncatingIfNeeded: (Int(stroke) * 1009 + p * 37) % 1_000_000)
            let y = Int32(truncatingIfNeeded: (Int(stroke) * 613 + p * 41) % 1_000_000)
            current.append(TimedCommand(timeMs: t, command: .point(StrokePoint(stroke: StrokeID(stroke), phase: phase, x: x, y: y))))
            t += 8
        }
        made += n
        if stroke % 10 == 0 {
            batches.append(current)
            current = []
        }
    }
    if !current.isEmpty { batches.append(current) }
    return batches
}

// MARK: simulator

/// The simulated daemon's key and primitives: `FakeCrypto` (the sync, not the secrecy, is
/// measured here; the same sealed protocol and packet sizes as over OpenSSL).
let syncSimCrypto = FakeCrypto(seed: 11)
let syncSimKey = StaticKeyPair(privateKey: syncSimCrypto.randomBytes(32), crypto: syncSimCrypto)

/// Fills `relay`'s room "bench" with `batches` from a teacher over an in-process sealed stream.
func syncBenchFill(_ relay: Relay, _ batches: [[TimedCommand]], now: Instant) {
    let session = ClientSession(ClientConfiguration(room: "bench", user: "teacher", role: .teacher, origin: 1, serverKey: syncSimKey.publicKey),
                                transport: .stream, crypto: syncSimCrypto, now: now)
    let id = SessionID(1)
    relay.handleSessionOpened(id, transport: .tcp, now: now)
    var decoder = StreamFrameDecoder(maxFrameBytes: 1 << 22)
    var server: SealedStreamSession?
    var next = 0
    var acked: UInt64 = 0
    func pump() {
        var moved = true
        while moved {
            moved = false
            while let bytes = session.pollTransmit(now: now) {
                moved = true
                decoder.handleBytes(bytes)
                while let frame = try? decoder.pollFrame() {
                    if let server {
                        try? server.handleMessage(frame, now: now)
                    } else if case .success(let (s, join)) = SealedStreamSession.accept(initiation: frame, staticKey: syncSimKey,
                                                                                         crypto: syncSimCrypto, now: now) {
                        server = s
                        relay.handleMessage(join, from: id, now: now)
                    }
                }
            }
            while let e = server?.pollEvent() {
                moved = true
                if case .delivered(let m) = e { relay.handleMessage(m, from: id, now: now) }
            }
            while let o = relay.pollOutput() {
                moved = true
                switch o {
                case .send(let to, let message) where to == id:
                    server?.send(SessionMessageCodec.encode(message), now: now)
                case .append(let record):
                    relay.handleDurable(room: record.room, upTo: record.roomSeq, now: now)
                default:
                    break
                }
            }
            while let m = server?.pollMessage() {
                moved = true
                session.handleStreamBytes(StreamFrameDecoder.frame(m), now: now)
            }
            while let e = session.pollEvent() {
                if case .acknowledged(let originSeq, _) = e { acked = originSeq }
            }
        }
    }
    pump()
    while next < batches.count {
        while next < batches.count, (try? session.send(batches[next], now: now)) != nil { next += 1 }
        pump()
    }
    pump()
    precondition(acked == UInt64(batches.count), "fill: \(acked) of \(batches.count) batches acknowledged")
}

/// The joiner's side as a simulated endpoint.
private final class SimJoiner: DatagramEndpoint {
    let session: ClientSession
    var done: (matches: Bool, at: Instant)?
    var bytes = 0
    var datagrams = 0

    init(now: Instant) {
        session = ClientSession(ClientConfiguration(room: "bench", user: "late", role: .viewer, origin: 2, serverKey: syncSimKey.publicKey),
                                transport: .datagram(connectionID: 77), crypto: syncSimCrypto, now: now)
    }
    func handleDatagram(_ datagram: [UInt8], now: Instant) {
        bytes += datagram.count
        datagrams += 1
        session.handleDatagram(datagram, now: now)
        events(now)
    }
    func handleTimeout(now: Instant) {
        session.handleTimeout(now: now)
        events(now)
    }
    func pollTransmit(now: Instant) -> [UInt8]? { session.pollTransmit(now: now) }
    func pollTimeout() -> Instant? { done == nil ? session.pollTimeout() : nil }
    private func events(_ now: Instant) {
        while let e = session.pollEvent() {
            if case .syncDone(_, _, let matches) = e, done == nil { done = (matches, now) }
        }
    }
}

/// The daemon's side as a simulated endpoint: a sealed session (made from the joiner's
/// handshake) feeding the relay, with the daemon's backpressure thresholds.
final class SimRelayEnd: DatagramEndpoint {
    let relay: Relay
    var sealed: SealedDatagramSession?
    let id = SessionID(2)
    var blocked = false
    /// The ARQ's statistics once the handshake made it (zero before).
    var stats: ARQStats { sealed?.arq?.stats ?? ARQStats() }
    var sendWindow: UInt32 { sealed?.arqConfiguration.sendWindow ?? ARQConfiguration().sendWindow }

    init(relay: Relay, now: Instant) {
        self.relay = relay
        relay.handleSessionOpened(id, transport: .udp, now: now)
    }
    func handleDatagram(_ datagram: [UInt8], now: Instant) {
        if let sealed {
            sealed.handleDatagram(datagram, now: now)
        } else if case .success(let (s, join)) = SealedDatagramSession.accept(
            initiation: datagram, staticKey: syncSimKey, reset: StatelessReset(staticPrivateKey: syncSimKey.privateKey, crypto: syncSimCrypto),
            crypto: syncSimCrypto, now: now) {
            sealed = s
            relay.handleMessage(join, from: id, now: now)
        }
        pump(now)
    }
    func handleTimeout(now: Instant) {
        sealed?.handleTimeout(now: now)
        relay.handleTimeout(now: now)
        pump(now)
    }
    func pollTransmit(now: Instant) -> [UInt8]? {
        let d = sealed?.pollTransmit(now: now)
        pump(now)
        return d?.bytes
    }
    func pollTimeout() -> Instant? {
        switch (sealed?.pollTimeout(), relay.pollTimeout()) {
        case (let a?, let b?): min(a, b)
        case (let a, let b): a ?? b
        }
    }
    private func pump(_ now: Instant) {
        guard let sealed else { return }
        var moved = true
        while moved {
            moved = false
            while let e = sealed.pollEvent() {
                moved = true
                if case .delivered(let m) = e { relay.handleMessage(m, from: id, now: now) }
            }
            while let o = relay.pollOutput() {
                moved = true
                if case .send(let to, let message) = o, to == id { try? sealed.send(SessionMessageCodec.encode(message)) }
            }
            let queued = sealed.arq?.queuedBytes ?? 0
            if !blocked && queued > 1 << 20 {
                blocked = true
                relay.handleBackpressure(id, now: now)
            } else if blocked && queued < 256 << 10 {
                blocked = false
                relay.handleReady(id, now: now)
                moved = true
            }
        }
    }
}

private func syncBenchSimulated(_ batches: [[TimedCommand]], lossPercent: Int, rttMs: Int, seed: UInt64) -> SyncBenchResult {
    let start = Instant.milliseconds(1000)
    let relay = Relay(configuration: RelayConfiguration(wallClockAtZeroMs: 1_700_000_000_000))
    syncBenchFill(relay, batches, now: start)
    let wallStart = syncBenchClock()
    let network = SimNetwork(seed: seed, start: start)
    var link = LinkConfiguration.clean(delay: .milliseconds(UInt64(rttMs / 2)))
    if lossPercent > 0 { link.loss = .bernoulli(Double(lossPercent) / 100) }
    link.queueCapacity = 100_000
    let joiner = SimJoiner(now: start)
    let server = SimRelayEnd(relay: relay, now: start)
    var maxWindow = 0, cwndLimitedSteps = 0, windowLimitedSteps = 0, steps = 0
    do {
        try network.connect(joiner, node: 0, server, node: 1, aToB: link, bToA: link)
        var limit = 0
        while joiner.done == nil, limit < 10_000_000, let t = network.nextEventTime() {
            try network.advance(to: t)
            limit += 1
            let stats = server.stats
            maxWindow = max(maxWindow, stats.congestionWindow)
            if stats.bytesInFlight + 1200 > stats.congestionWindow { cwndLimitedSteps += 1 }
            if stats.segmentsInFlight >= Int(server.sendWindow) - 1 { windowLimitedSteps += 1 }
            steps += 1
        }
    } catch {
        print("sync bench: simulator failed: \(error) (seed \(seed))")
        exit(1)
    }
    let wall = syncBenchClock() - wallStart
    guard let done = joiner.done else {
        print("sync bench: the sync never finished (seed \(seed))")
        exit(1)
    }
    let virtual = Double(done.at.since(start).microseconds) / 1e6
    let stats = server.stats
    let detail: [(String, String)] = [
        ("server_losses", "\(stats.lossesDetected)"), ("server_probes", "\(stats.probesSent)"),
        ("viewer_duplicates", "\(joiner.session.linkStats?.duplicateSegmentsReceived ?? 0)"),
        ("server_cwnd_end", "\(stats.congestionWindow)"), ("server_cwnd_max", "\(maxWindow)"),
        ("cwnd_limited_share", "\(Double(cwndLimitedSteps) / Double(max(steps, 1)))"),
        ("window_limited_share", "\(Double(windowLimitedSteps) / Double(max(steps, 1)))"),
    ]
    return SyncBenchResult(seconds: virtual, wallSeconds: wall, bytes: joiner.bytes, datagrams: joiner.datagrams,
                           retransmissions: stats.retransmissions, digestOK: done.matches, detail: detail)
}

