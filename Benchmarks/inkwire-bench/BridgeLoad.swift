import Glibc
import InkCodec
import InkProtocol
import InkUV

/// The shape of one bridge run.
struct BridgeShape {
    var daemons = 3
    var rooms = 10
    var members = 30
    var warmupSeconds: Double = 2
    var durationSeconds: Double = 30
    /// Watchers sharing one client socket (per daemon).
    var sessionsPerSocket = 50
    /// The drawer of room r is on daemon r % daemons; watcher k of a room on daemon k % daemons.
    func drawerDaemon(room: Int) -> Int { room % daemons }
    func watcherDaemon(watcher: Int) -> Int { watcher % daemons }
}

/// The load of `inkwire-bench bridge`: one drawer per room on its own daemon, the room's
/// watchers spread over every daemon, on one libuv loop (shared with the chaos proxy). A
/// delivery is *local* when the watcher is on the drawer's daemon, *remote* otherwise: the
/// difference is what the broker hop adds.
final class BridgeLoad: MemberLoad {
    let loop: EventLoop
    let wheel: FanoutWheel
    private let shape: BridgeShape
    private let workload: FanoutWorkload
    private let servers: [SocketAddress]
    private let securities: [BenchSecurity]
    private var drawers: [FanoutDrawer] = []
    private var watchers: [FanoutWatcher] = []
    private var ticker: LoopTimer?
    private let connectionBase: UInt64
    private var joinedWatchers = 0
    private var sentBatch: [[Int32]]
    private var sentAt: [[UInt64]]
    private(set) var local = FanoutHistogram()
    private(set) var remote = FanoutHistogram()
    private var deliveries = 0
    private var drawing = false
    private var drawStart: UInt64 = 0
    private var windowStart = UInt64.max
    private var windowEnd = UInt64.max

    /// Told of every remote delivery in the window (`--tap`).
    var tap: BridgeTap?

    static let watcherIndexBits = 24
    /// After the drawers joined, before watchers join: the home claims settle (claim wait
    /// 400 ms plus settle 300 ms, docs/protocol.md 9.3) with margin.
    static let claimSettleMicroseconds: UInt64 = 1_500_000

    init(loop: EventLoop, shape: BridgeShape, workload: FanoutWorkload, servers: [SocketAddress], securities: [BenchSecurity], seed: UInt64) {
        self.loop = loop
        self.securities = securities
        self.shape = shape
        self.workload = workload
        self.servers = servers
        wheel = FanoutWheel(nowMicroseconds: loop.now)
        connectionBase = ((seed & 0xFF_FFFF) | 0x200_0000) << UInt64(BridgeLoad.watcherIndexBits + 8)
        sentBatch = Array(repeating: [], count: shape.rooms)
        sentAt = Array(repeating: [], count: shape.rooms)
    }

    func roomName(_ room: Int) -> String { "bridge-room-\(room)" }

    func watcherJoined() { joinedWatchers += 1 }

    func matches(room: Int, roomSeq: UInt64, commands: [TimedCommand]) -> Bool {
        let index = Int(roomSeq) - 1
        guard index < sentBatch[room].count else { return false }
        return workload.batches[Int(sentBatch[room][index])] == commands
    }

    /// When (room, roomSeq) was handed to the drawer's socket.
    func handedAt(room: Int, roomSeq: UInt64) -> UInt64? {
        let index = Int(roomSeq) - 1
        guard room < sentAt.count, index >= 0, index < sentAt[room].count else { return nil }
        return sentAt[room][index]
    }

    func inWindow(_ time: UInt64) -> Bool { time >= windowStart && time < windowEnd }

    func delivered(room: Int, daemon: Int, roomSeq: UInt64, at now: UInt64) {
        deliveries += 1
        let sent = sentAt[room][Int(roomSeq) - 1]
        guard sent >= windowStart && sent < windowEnd else { return }
        let latency = now >= sent ? now - sent : 0
        if daemon == shape.drawerDaemon(room: room) {
            local.record(latency)
        } else {
            remote.record(latency)
            tap?.remoteDelivery(room: room, roomSeq: roomSeq, at: now)
        }
    }

    /// Joins everyone, draws for warm-up plus duration, drains; fills the delivery fields of
    /// `result`.
    func run(into result: inout BridgeResult, progress: (String) -> Void) {
        defer { close() }
        do {
            let ticker = try LoopTimer(loop: loop)
            ticker.start(afterMicroseconds: 1000, repeatingEveryMicroseconds: 1000) { [unowned self] in self.tick() }
            self.ticker = ticker
            let joinStart = loop.now
            for room in 0..<shape.rooms {
                let phase = UInt64(room) * workload.loopMicroseconds / UInt64(max(shape.rooms, 1))
                let daemon = shape.drawerDaemon(room: room)
                drawers.append(try FanoutDrawer(room: room, daemon: daemon, server: servers[daemon],
                                                connectionID: connectionBase | (1 << UInt64(BridgeLoad.watcherIndexBits)) | UInt64(room),
                                                schedule: FanoutSchedule(workload: workload, phase: phase), load: self, now: loop.now))
            }
            guard runUntil(limit: 20_000_000, { self.drawers.allSatisfy(\.joined) }) else {
                result.failure = "drawers did not join"
                return
            }
            // The drawer's daemon claims the room before any other daemon opens it.
            _ = runUntil(limit: BridgeLoad.claimSettleMicroseconds) { false }
            try openWatchers()
            let watcherCount = shape.rooms * (shape.members - 1)
            guard runUntil(limit: 30_000_000, { self.joinedWatchers >= watcherCount }) else {
                result.failure = "only \(joinedWatchers) of \(watcherCount) watchers joined"
                return
            }
            result.joinSeconds = Double(loop.now - joinStart) / 1e6
            progress("joined \(shape.rooms * shape.members) members over \(shape.daemons) daemons in \(fanoutFixed(result.joinSeconds, 1)) s")
            _ = runUntil(limit: BridgeLoad.claimSettleMicroseconds) { false }

            drawStart = loop.now
            drawing = true
            windowStart = drawStart + UInt64(shape.warmupSeconds * 1e6)
            windowEnd = windowStart + UInt64(shape.durationSeconds * 1e6)
            _ = runUntil(limit: windowStart - loop.now) { false }
            var lastProgress = loop.now
            _ = runUntil(limit: windowEnd - loop.now) {
                if self.loop.now - lastProgress >= 10_000_000 {
                    lastProgress = self.loop.now
                    progress("\(Int((self.loop.now - self.windowStart) / 1_000_000)) s of \(Int(self.shape.durationSeconds)) s, \(self.deliveries) deliveries")
                }
                return false
            }
            drawing = false
            // Drain: every watcher reaches its room's last batch, every drawer its last ack
            // (gap repair over the broker takes up to a few hundred ms per gap).
            _ = runUntil(limit: 15_000_000) {
                self.watchers.allSatisfy { $0.nextRoomSeq > UInt64(self.sentAt[$0.room].count) }
                    && self.drawers.allSatisfy { $0.acknowledged >= UInt64(self.sentAt[$0.room].count) }
            }
        } catch {
            result.failure = "\(error)"
            return
        }
        var expected = 0, received = 0
        for w in watchers {
            let sent = sentAt[w.room].count
            expected += sent
            received += min(Int(w.nextRoomSeq) - 1, sent)
            result.errors += w.errors
        }
        for d in drawers where d.acknowledged < UInt64(sentAt[d.room].count) { result.unacknowledgedDrawers += 1 }
        result.errors += drawers.reduce(0) { $0 + $1.errors }
        result.completeness = expected == 0 ? 0 : Double(received) / Double(expected)
        result.deliveries = deliveries
        result.batches = sentAt.reduce(0) { $0 + $1.count }
        result.local = BridgeLatency(local)
        result.remote = BridgeLatency(remote)
    }

    private func openWatchers() throws {
        // One socket per `sessionsPerSocket` watchers of one daemon.
        var socketOf: [Int: (UDPSocket, Int)] = [:]
        let perRoom = shape.members - 1
        var index = 0
        for member in 0..<perRoom {
            for room in 0..<shape.rooms {
                let daemon = shape.watcherDaemon(watcher: member)
                var entry = socketOf[daemon]
                if entry == nil || entry!.1 >= shape.sessionsPerSocket {
                    entry = (try openSocket(to: servers[daemon]), 0)
                }
                entry!.1 += 1
                socketOf[daemon] = entry
                watchers.append(FanoutWatcher(room: room, daemon: daemon, user: "w\(member)", origin: UInt64(index + 1),
                                              connectionID: connectionBase | UInt64(index), socket: entry!.0, load: self, now: loop.now))
                index += 1
            }
        }
    }

    private var sockets: [UDPSocket] = []
    private func openSocket(to server: SocketAddress) throws -> UDPSocket {
        let socket = try UDPSocket(loop: loop, bindTo: .loopbackIPv4(port: 0))
        try socket.connect(to: server)
        try? socket.setReceiveBufferSize(2 << 20)
        let base = connectionBase
        let mask = UInt64(1) << UInt64(BridgeLoad.watcherIndexBits) - 1
        try socket.startReceiving { [unowned self] buffer, _ in
            let datagram = Array(buffer)
            guard let id = PacketCodec.peek(datagram)?.connectionID, id & ~mask == base else { return }
            let index = Int(id & mask)
            guard index < self.watchers.count else { return }
            self.watchers[index].receive(datagram, now: self.loop.now)
        }
        sockets.append(socket)
        return socket
    }

    func security(daemon: Int) -> BenchSecurity { securities[daemon] }

    /// Runs the loop until `done` or `limit` µs pass; false on the limit.
    func runUntil(limit: UInt64, _ done: () -> Bool) -> Bool {
        let end = loop.now + limit
        while loop.now < end {
            if done() { return true }
            _ = loop.runOnce()
        }
        return done()
    }

    private func tick() {
        let now = loop.now
        wheel.advance(now: now)
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
    }
}

/// Quantiles of one latency histogram, ms.
struct BridgeLatency {
    var count = 0
    var p50 = 0.0
    var p99 = 0.0
    var max = 0.0

    init() {}
    init(_ histogram: FanoutHistogram) {
        count = histogram.total
        p50 = histogram.quantileMs(0.5)
        p99 = histogram.quantileMs(0.99)
        max = Double(histogram.maximum) / 1000
    }
}
