import Glibc
import InkClient
import InkCodec
import InkProtocol
import InkRelay
import InkSim

/// `inkwire-bench background [--image-bytes 2000000] [--trace FILE] [--loss-percent 0,5]
/// [--rtt-ms 20] [--seeds 1-3] [--members 40]`: board backgrounds (docs/protocol.md 6a).
/// 1. A late joiner of a room holding a background of `--image-bytes` and a lesson (the trace,
///    lesson-a's 20 minutes by default; made-up strokes of the same size without it), in the
///    simulator (the relay and client cores, sealed ARQ over an `InkSim` link with the loss and
///    RTT, virtual time): from the join to the first stroke drawn, to the sync done, and to the
///    background whole and checked.
/// 2. Fan-out: `--members` live members when the teacher uploads and sets a background: the
///    session-message bytes each member is sent, and how many times the image is in them.
/// The relay stores the image without decoding it here (the daemon's check is InkImage's).
func runBackgroundBench(_ arguments: [String]) -> Never {
    func value(_ name: String) -> String? {
        arguments.firstIndex(of: name).flatMap { $0 + 1 < arguments.count ? arguments[$0 + 1] : nil }
    }
    let imageBytes = Int(value("--image-bytes") ?? "") ?? 2_000_000
    let losses = (value("--loss-percent") ?? "0,5").split(separator: ",").compactMap { Int($0) }
    let rttMs = Int(value("--rtt-ms") ?? "") ?? 20
    let members = Int(value("--members") ?? "") ?? 40
    let seedText = value("--seeds") ?? "1-3"
    let bounds = seedText.split(separator: "-").compactMap { UInt64($0) }
    let seeds = bounds.count == 2 ? Array(bounds[0]...bounds[1]) : bounds
    let tracePath = value("--trace") ?? ["../shared/traces/lesson-a.csv", "../../shared/traces/lesson-a.csv"].first { access($0, R_OK) == 0 }
    let lesson = backgroundBenchLesson(tracePath)
    let image = (0..<imageBytes).map { UInt8(truncatingIfNeeded: $0 &* 2_654_435_761 >> 13) }
    let points = lesson.reduce(0) { $0 + $1.filter { if case .point = $0.command { true } else { false } }.count }

    var rows: [String] = []
    for loss in losses {
        for seed in seeds {
            let r = backgroundLateJoin(lesson: lesson, image: image, lossPercent: loss, rttMs: rttMs, seed: seed)
            print("{\"bench\":\"background-late-join\",\"image_bytes\":\(imageBytes),\"lesson_points\":\(points),\"loss_percent\":\(loss),\"rtt_ms\":\(rttMs),"
                  + "\"seed\":\(seed),\"first_stroke_s\":\(r.firstStroke),\"sync_done_s\":\(r.syncDone),\"background_s\":\(r.background),"
                  + "\"background_ok\":\(r.backgroundOK),\"digest_ok\":\(r.digestOK),\"bytes\":\(r.bytes),\"wall_s\":\(r.wall)}")
            rows.append("| \(loss) | \(seed) | \(r.firstStroke) | \(r.syncDone) | \(r.background) | \(r.backgroundOK && r.digestOK ? "ok" : "FAILED") | \(r.bytes) |")
        }
    }
    let fan = backgroundFanOut(image: image, members: members)
    print("{\"bench\":\"background-fanout\",\"image_bytes\":\(imageBytes),\"members\":\(members),\"bytes_per_member_min\":\(fan.min),"
          + "\"bytes_per_member_max\":\(fan.max),\"bytes_total\":\(fan.total),\"image_copies_per_member_max\":\(fan.copies),\"all_received\":\(fan.allReceived)}")
    print("")
    print("| loss % | seed | first stroke s | sync done s | background whole s | checks | bytes to joiner |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for row in rows { print(row) }
    print("")
    print("| members | image bytes | session-message bytes per member (min-max) | total | image copies per member | all received |")
    print("| --- | --- | --- | --- | --- | --- |")
    print("| \(members) | \(imageBytes) | \(fan.min)-\(fan.max) | \(fan.total) | \(fan.copies) | \(fan.allReceived) |")
    exit(0)
}

/// The lesson's batches, 60 ms each (or made-up strokes of lesson-a's size without the trace).
private func backgroundBenchLesson(_ path: String?) -> [[TimedCommand]] {
    if let path, let fd = fopen(path, "r") {
        defer { fclose(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = fread(&chunk, 1, chunk.count, fd)
            if n <= 0 { break }
            bytes += chunk.prefix(n)
        }
        if let lines = try? Trace.parse(bytes) {
            var translator = LegacyTranslator(author: AuthorID(1))
            return Batch.cut(lines.map { translator.timedCommand(from: $0.message, timeMs: $0.timeMs) }, author: AuthorID(1)).map(\.commands)
        }
    }
    return syncBenchBoard(points: 27_744)
}

/// Stands in for the daemon's store in the bench: every upload whose hash matches is kept.
private final class BenchBlobs: RoomBlobs {
    var stored: [BlobHash: [UInt8]] = [:]
    func imageSize(room: String, hash: BlobHash) -> ImageSize? { stored[hash] == nil ? nil : ImageSize(width: 1600, height: 1200) }
    func readBlob(room: String, hash: BlobHash) -> [UInt8]? { stored[hash] }
    func storeImage(room: String, hash: BlobHash, bytes: [UInt8], now: Instant) -> Result<ImageSize, BlobRefusal> {
        guard syncSimCrypto.sha256(bytes) == hash.bytes else { return .failure(BlobRefusal("hash")) }
        stored[hash] = bytes
        return .success(ImageSize(width: 1600, height: 1200))
    }
}

/// A teacher's direct relay session uploads `image`, names it page 0's background, and the
/// store makes it durable at once.
private func backgroundBenchSet(_ relay: Relay, _ image: [UInt8], session: SessionID, now: Instant) -> BlobHash {
    let hash = backgroundBenchSetKeepingOutputs(relay, image, now: now)
    while let o = relay.pollOutput() {
        if case .append(let record) = o { relay.handleDurable(room: record.room, upTo: record.roomSeq, now: now) }
    }
    return hash
}

private final class BackgroundJoiner: DatagramEndpoint {
    let session: ClientSession
    let start: Instant
    var firstStroke: Instant?
    var syncDone: (matches: Bool, at: Instant)?
    var background: (ok: Bool, at: Instant)?
    let hash: BlobHash
    var bytes = 0

    init(hash: BlobHash, now: Instant) {
        var configuration = ClientConfiguration(room: "bench", user: "late", role: .viewer, origin: 2, serverKey: syncSimKey.publicKey)
        configuration.blobHash = { syncSimCrypto.sha256($0) }
        session = ClientSession(configuration, transport: .datagram(connectionID: 78), crypto: syncSimCrypto, now: now)
        self.hash = hash
        start = now
    }
    func handleDatagram(_ datagram: [UInt8], now: Instant) {
        bytes += datagram.count
        session.handleDatagram(datagram, now: now)
        events(now)
    }
    func handleTimeout(now: Instant) {
        session.handleTimeout(now: now)
        events(now)
    }
    func pollTransmit(now: Instant) -> [UInt8]? { session.pollTransmit(now: now) }
    func pollTimeout() -> Instant? { background == nil ? session.pollTimeout() : nil }
    private func events(_ now: Instant) {
        while let e = session.pollEvent() {
            switch e {
            case .delivered(let batch):
                if firstStroke == nil, batch.commands.contains(where: { if case .point = $0.command { true } else { false } }) { firstStroke = now }
            case .syncDone(_, _, let matches):
                if syncDone == nil { syncDone = (matches, now) }
            case .background(let h, _):
                if h == hash { background = (true, now) }
            case .backgroundFailed(let h, _):
                if h == hash { background = (false, now) }
            default:
                break
            }
        }
    }
}

private func backgroundLateJoin(lesson: [[TimedCommand]], image: [UInt8], lossPercent: Int, rttMs: Int, seed: UInt64)
    -> (firstStroke: Double, syncDone: Double, background: Double, backgroundOK: Bool, digestOK: Bool, bytes: Int, wall: Double) {
    let start = Instant.milliseconds(1000)
    let relay = Relay(configuration: RelayConfiguration(wallClockAtZeroMs: 1_700_000_000_000))
    let blobs = BenchBlobs()
    relay.blobs = blobs
    let hash = backgroundBenchSet(relay, image, session: SessionID(9), now: start)
    syncBenchFill(relay, lesson, now: start)
    let wallStart = syncBenchClock()
    let network = SimNetwork(seed: seed, start: start)
    var link = LinkConfiguration.clean(delay: .milliseconds(UInt64(rttMs / 2)))
    if lossPercent > 0 { link.loss = .bernoulli(Double(lossPercent) / 100) }
    link.queueCapacity = 100_000
    let joiner = BackgroundJoiner(hash: hash, now: start)
    let server = SimRelayEnd(relay: relay, now: start)
    do {
        try network.connect(joiner, node: 0, server, node: 1, aToB: link, bToA: link)
        var limit = 0
        while joiner.background == nil, limit < 20_000_000, let t = network.nextEventTime() {
            try network.advance(to: t)
            limit += 1
        }
    } catch {
        print("background bench: simulator failed: \(error) (seed \(seed))")
        exit(1)
    }
    func seconds(_ i: Instant?) -> Double { i.map { (Double($0.since(start).microseconds) / 1e3).rounded() / 1e3 } ?? -1 }
    return (seconds(joiner.firstStroke), seconds(joiner.syncDone?.at), seconds(joiner.background?.at), joiner.background?.ok == true,
            joiner.syncDone?.matches == true, joiner.bytes, ((syncBenchClock() - wallStart) * 1000).rounded() / 1000)
}

/// `members` viewers following the room through `RoomFollower` (their replies go back to the
/// relay) when a background is set: the bytes of every message each one is sent.
private func backgroundFanOut(image: [UInt8], members: Int) -> (min: Int, max: Int, total: Int, copies: Int, allReceived: Bool) {
    let now = Instant.milliseconds(1000)
    let relay = Relay(configuration: RelayConfiguration(wallClockAtZeroMs: 1_700_000_000_000))
    let blobs = BenchBlobs()  // the relay holds it weakly
    relay.blobs = blobs
    var followers: [SessionID: RoomFollower] = [:]
    var bytes: [SessionID: Int] = [:]
    var chunkBytes: [SessionID: Int] = [:]
    var received: Set<SessionID> = []
    func drain() {
        var replies: [(SessionID, ClientMessage)] = []
        repeat {
            for (s, m) in replies { relay.handle(m, from: s, now: now) }
            replies = []
            while let o = relay.pollOutput() {
                switch o {
                case .send(let s, let m):
                    guard followers[s] != nil else { continue }
                    bytes[s, default: 0] += SessionMessageCodec.encode(m).count
                    if case .blobChunk(_, _, _, _, let data) = m { chunkBytes[s, default: 0] += data.count }
                    for e in followers[s]!.handle(m) {
                        if case .reply(let r) = e { replies.append((s, r)) }
                        if case .blob = e { received.insert(s) }
                    }
                case .append(let record):
                    relay.handleDurable(room: record.room, upTo: record.roomSeq, now: now)
                default:
                    break
                }
            }
        } while !replies.isEmpty
    }
    for i in 0..<members {
        let s = SessionID(UInt64(100 + i))
        var f = RoomFollower(origin: UInt64(100 + i), blobHash: { syncSimCrypto.sha256($0) })
        relay.handleSessionOpened(s, transport: .udp, now: now)
        relay.handle(f.join(room: "bench", user: "m\(i)", role: .viewer), from: s, now: now)
        followers[s] = f
    }
    drain()
    bytes = [:]
    _ = backgroundBenchSetKeepingOutputs(relay, image, now: now)
    drain()
    let per = followers.keys.map { bytes[$0] ?? 0 }
    let copies = followers.keys.map { (chunkBytes[$0] ?? 0) / max(1, image.count) }.max() ?? 0
    withExtendedLifetime(blobs) {}
    return (per.min() ?? 0, per.max() ?? 0, per.reduce(0, +), copies, received.count == members)
}

/// `backgroundBenchSet` without draining the relay's outputs (the fan-out counts them).
private func backgroundBenchSetKeepingOutputs(_ relay: Relay, _ image: [UInt8], now: Instant) -> BlobHash {
    let hash = BlobHash(syncSimCrypto.sha256(image))!
    let session = SessionID(9)
    relay.handleSessionOpened(session, transport: .tcp, now: now)
    relay.handle(.join(JoinRequest(room: "bench", user: "uploader", role: .teacher, origin: 900)), from: session, now: now)
    var offset = 0
    while offset < image.count {
        let end = min(image.count, offset + ClientConfiguration.uploadPartBytes)
        relay.handle(.blobPut(hash: hash, size: UInt32(image.count), offset: UInt32(offset), data: Array(image[offset..<end])), from: session, now: now)
        offset = end
    }
    var state = BinaryCodecState()
    let background = PageBackground(page: .first, image: BackgroundImage(hash: hash, width: 1600, height: 1200)!)
    let payload = try! BinaryBatchCodec.encode(Batch(author: AuthorID(0), commands: [TimedCommand(timeMs: 0, command: .background(background))]), state: &state)
    relay.handle(.batch(originSeq: 1, payload: payload), from: session, now: now)
    return hash
}
