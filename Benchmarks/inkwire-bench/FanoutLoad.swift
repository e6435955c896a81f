import Glibc
import InkCodec
import InkProtocol
import InkUV

/// One fanout run's shape.
struct FanoutShape {
    var rooms: Int
    var members: Int
    var warmupSeconds: Double = 5
    var durationSeconds: Double = 60
    /// Watchers sharing one client socket (the daemon routes by connection id, not address).
    /// The load reads each socket once per millisecond, so fewer sockets cost fewer calls.
    var sessionsPerSocket = 1000
    /// New watcher sessions opened per second during the join phase.
    var joinsPerSecond = 1000
    /// Print the worst added latency and the daemon's drops of every second (diagnosis).
    var timeline = false
    var sessions: Int { rooms * members }
}

/// What one run measured.
struct FanoutResult {
    var shape: FanoutShape
    var cpuPercent = 0.0
    var rssMegabytes = 0.0
    var addedP50Ms = 0.0
    var addedP99Ms = 0.0
    var addedP999Ms = 0.0
    var addedMaxMs = 0.0
    var completeness = 0.0
    var generatorCPUPercent = 0.0
    var deliveries = 0
    var batches = 0
    var errors = 0
    var joinSeconds = 0.0
    /// Datagrams the kernel dropped on a full receive buffer: the daemon's socket, the load's.
    var daemonDrops = 0
    var generatorDrops = 0
    /// How long the window's deliveries waited in the load's sockets before it read them
    /// (the latency figures are measured to their arrival, not to this).
    var generatorLagP99Ms = 0.0
    /// Sessions sealed (OpenSSL), or the unsealed baseline.
    var sealed = true
    /// With `--status-poll-ms`: GET /status.json loads, their times and size, failures.
    var statusLoads = 0
    var statusP50Ms = 0.0
    var statusP99Ms = 0.0
    var statusBytes = 0
    var statusFailures = 0
    var failure: String?

    var json: String {
        let fields: [(String, String)] = [
            ("bench", "\"fanout\""), ("sealing", sealed ? "\"on\"" : "\"off\""), ("sessions", "\(shape.sessions)"), ("rooms", "\(shape.rooms)"), ("members", "\(shape.members)"),
            ("duration_s", fanoutFixed(shape.durationSeconds, 1)), ("cpu_percent", fanoutFixed(cpuPercent, 1)), ("rss_mb", fanoutFixed(rssMegabytes, 1)),
            ("added_p50_ms", fanoutFixed(addedP50Ms, 2)), ("added_p99_ms", fanoutFixed(addedP99Ms, 2)), ("added_p999_ms", fanoutFixed(addedP999Ms, 2)),
            ("added_max_ms", fanoutFixed(addedMaxMs, 2)), ("completeness", fanoutFixed(completeness, 6)), ("deliveries", "\(deliveries)"),
            ("batches", "\(batches)"), ("errors", "\(errors)"), ("generator_cpu_percent", fanoutFixed(generatorCPUPercent, 1)),
            ("join_s", fanoutFixed(joinSeconds, 2)),
            ("daemon_udp_drops", "\(daemonDrops)"), ("generator_udp_drops", "\(generatorDrops)"),
            ("generator_lag_p99_ms", fanoutFixed(generatorLagP99Ms, 2)),
        ] + (statusLoads + statusFailures > 0 ? [("status_loads", "\(statusLoads)"), ("status_p50_ms", fanoutFixed(statusP50Ms, 2)),
                                                ("status_p99_ms", fanoutFixed(statusP99Ms, 2)), ("status_bytes", "\(statusBytes)"),
                                                ("status_failures", "\(statusFailures)")] : []) + (failure.map { [("failure", "\"\($0.filter { $0 != "\"" && $0 != "\\" })\"")] } ?? [])
        return "{" + fields.map { "\"\($0.0)\":\($0.1)" }.joined(separator: ",") + "}"
    }
}

func fanoutFixed(_ v: Double, _ digits: Int) -> String {
    var scale = 1.0
    for _ in 0..<digits { scale *= 10 }
    let r = (v * scale).rounded() / scale
    var text = "\(r)"
    if text.hasSuffix(".0") && digits == 0 { text.removeLast(2) }
    if text.contains("e") { text = "\(Int(r))" }
    return text
}

/// The load generator of `inkwire-bench fanout`: one drawer per room playing the workload at
/// lesson rate, the other members watching, all over native UDP sessions on one libuv loop.
/// Watchers share sockets (`sessionsPerSocket` each), found again by connection id; every
/// session's ARQ deadline sits in one timer wheel.
final class FanoutLoad: MemberLoad {
    let loop: EventLoop
    let wheel: FanoutWheel
    private let sealing: BenchSecurity
    private let shape: FanoutShape
    private let workload: FanoutWorkload
    private let server: SocketAddress
    private var drawers: [FanoutDrawer] = []
    private var watchers: [FanoutWatcher] = []
    private var sockets: [FanoutSocket] = []
    /// Per room: its checked batches, shared by its watchers.
    private var references: [FanoutBatchReference]
    /// One received datagram, copied into the same storage every time (no allocation).
    private var scratch: [UInt8] = []
    private var ticker: LoopTimer?
    /// High bits of every watcher's connection id (the low 24 bits are its index).
    private let connectionBase: UInt64
    private var joinedWatchers = 0
    /// Per room: the workload index of each batch sent (room sequence number - 1) and when
    /// it was handed to the drawer's socket.
    private var sentBatch: [[Int32]]
    private var sentAt: [[UInt64]]
    private var histogram = FanoutHistogram()
    /// Arrival to reading, per delivery in the window.
    private var lag = FanoutHistogram()
    /// The `now` of the current tick and of the one before (the watchers' clock for what
    /// arrived in between).
    private var tickNow: UInt64 = 0
    private var previousTickNow: UInt64 = 0
    private var deliveries = 0
    private var drawing = false
    private var drawStart: UInt64 = 0
    private var windowStart = UInt64.max
    private var windowEnd = UInt64.max
    private var secondWorst: UInt64 = 0
    /// The longest gap between two ticks of the load's loop this second (its own stalls).
    private var lastTick: UInt64 = 0
    private var worstTickGap: UInt64 = 0

    static let watcherIndexBits = 24

    init(shape: FanoutShape, workload: FanoutWorkload, server: SocketAddress, security: BenchSecurity, seed: UInt64) throws {
        sealing = security
        self.shape = shape
        self.workload = workload
        self.server = server
        loop = try EventLoop()
        wheel = FanoutWheel(nowMicroseconds: loop.now)
        connectionBase = ((seed & 0xFF_FFFF) | 0x100_0000) << UInt64(FanoutLoad.watcherIndexBits + 8)
        sentBatch = Array(repeating: [], count: shape.rooms)
        sentAt = Array(repeating: [], count: shape.rooms)
        references = (0..<shape.rooms).map { _ in FanoutBatchReference() }
        scratch.reserveCapacity(FanoutSocket.slotBytes)
    }

    func roomName(_ room: Int) -> String { "room-\(room)" }
    func security(daemon: Int) -> BenchSecurity { sealing }
    func connectionID(drawer room: Int) -> UInt64 { connectionBase | (1 << UInt64(FanoutLoad.watcherIndexBits)) | UInt64(room) }

    // MARK: callbacks from members

    func watcherJoined() { joinedWatchers += 1 }

    func matches(room: Int, roomSeq: UInt64, commands: [TimedCommand]) -> Bool {
        let index = Int(roomSeq) - 1
        guard index < sentBatch[room].count else { return false }
        return workload.batches[Int(sentBatch[room][index])] == commands
    }

    func delivered(room: Int, daemon: Int, roomSeq: UInt64, at now: UInt64) {
        deliveries += 1
        let sent = sentAt[room][Int(roomSeq) - 1]
        if sent >= windowStart && sent < windowEnd {
            histogram.record(now >= sent ? now - sent : 0)
            lag.record(tickNow >= now ? tickNow - now : 0)
        }
        secondWorst = max(secondWorst, now >= sent ? now - sent : 0)
    }

    // MARK: the run

    /// Joins everyone, draws for warm-up plus duration, drains, and measures `daemon`.
    func run(daemon: FanoutDaemon, progress: (String) -> Void) -> FanoutResult {
        var result = FanoutResult(shape: shape)
        defer { close() }
        do {
            let ticker = try LoopTimer(loop: loop)
            ticker.start(afterMicroseconds: 1000, repeatingEveryMicroseconds: 1000) { [unowned self] in self.tick() }
            self.ticker = ticker
            let joinStart = loop.now
            for room in 0..<shape.rooms {
                let phase = UInt64(room) * workload.loopMicroseconds / UInt64(max(shape.rooms, 1))
                drawers.append(try FanoutDrawer(room: room, server: server, connectionID: connectionID(drawer: room), schedule: FanoutSchedule(workload: workload, phase: phase),
                                                load: self, now: loop.now))
            }
            guard runUntil(limit: 20_000_000, { self.drawers.allSatisfy(\.joined) }) else {
                result.failure = "drawers did not join"
                return result
            }
            try openWatchers(progress: progress)
            let watcherCount = shape.rooms * (shape.members - 1)
            let joinLimit = UInt64(30_000_000 + watcherCount * 1_000_000 / max(shape.joinsPerSecond, 1))
            guard runUntil(limit: joinLimit, { self.joinedWatchers >= watcherCount }) else {
                result.failure = "only \(joinedWatchers) of \(watcherCount) watchers joined"
                return result
            }
            result.joinSeconds = Double(loop.now - joinStart) / 1e6
            progress("joined \(shape.sessions) sessions in \(fanoutFixed(result.joinSeconds, 1)) s")
            // Let the join traffic (member lists) settle before drawing.
            _ = runUntil(limit: 2_000_000, { false })

            drawStart = loop.now
            drawing = true
            windowStart = drawStart + UInt64(shape.warmupSeconds * 1e6)
            windowEnd = windowStart + UInt64(shape.durationSeconds * 1e6)
            _ = runUntil(limit: windowStart - loop.now, { false })
            let daemonCPU0 = daemon.cpuSeconds
            let ownCPU0 = FanoutDaemon.cpuSeconds(pid: getpid())
            let wall0 = loop.now
            var lastProgress = wall0
            var lastSecond = wall0
            _ = runUntil(limit: windowEnd - loop.now) {
                if self.shape.timeline && self.loop.now - lastSecond >= 1_000_000 {
                    lastSecond = self.loop.now
                    progress("t=\(Int((self.loop.now - wall0) / 1_000_000)) s worst \(fanoutFixed(Double(self.secondWorst) / 1000, 1)) ms, "
                        + "deliveries \(self.deliveries), daemon drops \(FanoutDaemon.udpDrops(ports: [self.server.port])), "
                        + "daemon cpu \(fanoutFixed(daemon.cpuSeconds, 2)) s, load tick gap \(fanoutFixed(Double(self.worstTickGap) / 1000, 1)) ms")
                    self.secondWorst = 0
                    self.worstTickGap = 0
                }
                if self.loop.now - lastProgress >= 10_000_000 {
                    lastProgress = self.loop.now
                    progress("\(Int((self.loop.now - wall0) / 1_000_000)) s of \(Int(self.shape.durationSeconds)) s, \(self.deliveries) deliveries")
                }
                return false
            }
            let wall = Double(loop.now - wall0) / 1e6
            result.cpuPercent = (daemon.cpuSeconds - daemonCPU0) / wall * 100
            result.generatorCPUPercent = (FanoutDaemon.cpuSeconds(pid: getpid()) - ownCPU0) / wall * 100
            drawing = false
            // Drain: every watcher reaches its room's last batch, every drawer its last ack.
            // Checked every 20 ms: walking every watcher at each loop round would slow the
            // load down and show as latency.
            var lastCheck: UInt64 = 0
            _ = runUntil(limit: 5_000_000) {
                guard self.loop.now - lastCheck >= 20_000 else { return false }
                lastCheck = self.loop.now
                return self.watchers.allSatisfy { $0.nextRoomSeq > UInt64(self.sentAt[$0.room].count) }
                    && self.drawers.allSatisfy { $0.acknowledged >= UInt64(self.sentAt[$0.room].count) }
            }
            result.rssMegabytes = daemon.peakRSSMegabytes
            result.daemonDrops = FanoutDaemon.udpDrops(ports: [server.port])
            let own = Set(sockets.map(\.localPort) + drawers.compactMap { try? $0.socket.localAddress.port })
            result.generatorDrops = FanoutDaemon.udpDrops(ports: own)
        } catch {
            result.failure = "\(error)"
            return result
        }
        var expected = 0
        var received = 0
        for w in watchers {
            let sent = sentAt[w.room].count
            expected += sent
            received += min(Int(w.nextRoomSeq) - 1, sent)
            result.errors += w.errors
        }
        for d in drawers where d.acknowledged < UInt64(sentAt[d.room].count) { result.errors += 1 }
        result.errors += drawers.reduce(0) { $0 + $1.errors }
        result.completeness = expected == 0 ? 0 : Double(received) / Double(expected)
        result.deliveries = deliveries
        result.batches = sentAt.reduce(0) { $0 + $1.count }
        result.addedP50Ms = histogram.quantileMs(0.5)
        result.addedP99Ms = histogram.quantileMs(0.99)
        result.addedP999Ms = histogram.quantileMs(0.999)
        result.addedMaxMs = Double(histogram.maximum) / 1000
        result.generatorLagP99Ms = lag.quantileMs(0.99)
        return result
    }

    /// Opens the watchers at `joinsPerSecond`, `sessionsPerSocket` to a socket. A room's
    /// watchers share sockets (room after room), so the daemon's fan-out of one batch lands on
    /// one or two sockets and is read, and acknowledged, in batches.
    private func openWatchers(progress: (String) -> Void) throws {
        let perRoom = shape.members - 1
        let total = shape.rooms * perRoom
        for _ in 0..<(total + shape.sessionsPerSocket - 1) / shape.sessionsPerSocket { try openSocket() }
        let start = loop.now
        var opened = 0
        _ = runUntil(limit: UInt64(60_000_000 + total * 2_000_000 / max(shape.joinsPerSecond, 1))) {
            let due = min(total, Int((self.loop.now - start) * UInt64(self.shape.joinsPerSecond) / 1_000_000) + 1)
            while opened < due {
                // Round robin over rooms, so every room fills at the same pace.
                let room = opened % self.shape.rooms
                let member = opened / self.shape.rooms
                let socket = self.sockets[(room * perRoom + member) / self.shape.sessionsPerSocket]
                self.watchers.append(FanoutWatcher(room: room, user: "w\(member)", origin: UInt64(opened + 1),
                                                   connectionID: self.connectionBase | UInt64(opened), socket: socket,
                                                   reference: self.references[room], load: self, now: self.loop.now))
                socket.flush()
                opened += 1
            }
            return opened >= total
        }
    }

    private func openSocket() throws {
        let socket = try FanoutSocket(server: server, receiveBufferBytes: 4 << 20) { [unowned self] buffer, arrivedAt in
            self.receive(buffer, arrivedAt: arrivedAt)
        }
        sockets.append(socket)
    }

    /// Routes one datagram to its watcher by connection id. Its ARQ takes it at its arrival
    /// (no earlier than the last tick, so a session's clock never goes back), as a client that
    /// reads at once would.
    private func receive(_ buffer: UnsafeRawBufferPointer, arrivedAt: UInt64) {
        let mask = UInt64(1) << UInt64(FanoutLoad.watcherIndexBits) - 1
        scratch.removeAll(keepingCapacity: true)
        scratch.append(contentsOf: buffer)
        guard let id = PacketCodec.peek(scratch)?.connectionID, id & ~mask == connectionBase else { return }
        let index = Int(id & mask)
        guard index < watchers.count else { return }
        watchers[index].receive(scratch, now: max(arrivedAt, previousTickNow), arrivedAt: arrivedAt)
    }

    /// Runs the loop until `done` or `limit` µs pass; false on the limit.
    private func runUntil(limit: UInt64, _ done: () -> Bool) -> Bool {
        let end = loop.now + limit
        while loop.now < end {
            if done() { return true }
            _ = loop.runOnce()
        }
        return done()
    }

    /// Every millisecond: what the watchers' sockets received, ARQ deadlines, then batches
    /// that fell due.
    private func tick() {
        let now = loop.now
        if lastTick > 0 { worstTickGap = max(worstTickGap, now - lastTick) }
        lastTick = now
        tickNow = now
        for socket in sockets { socket.drain(now: now) }
        previousTickNow = now
        wheel.advance(now: now)
        // What the timers sent (acks, mostly) leaves in one call per socket.
        for socket in sockets { socket.flush() }
        guard drawing else { return }
        let elapsed = now - drawStart
        for drawer in drawers {
            drawer.drawDue(elapsed: elapsed, batches: &sentBatch[drawer.room], handedAt: &sentAt[drawer.room])
        }
    }

    private func close() {
        ticker?.close()
        for d in drawers { d.close() }
        for s in sockets { s.close() }
        loop.shutdown()
    }
}
