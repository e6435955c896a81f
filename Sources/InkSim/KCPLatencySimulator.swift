/// KCP's `LatencySimulator` (from its `test.h`), reproduced exactly so Inkwire's ARQ can be set
/// beside KCP's published figures on the same link. See docs/notes/kcp-experiment.md.
///
/// Two one-way FIFO queues (A->B and B->A). One glibc `rand()` stream is shared by both
/// directions and by loss and delay: every send draws once from its direction's loss bag and,
/// if it survives, once for its delay. A queue never reorders: `receive` only looks at its head,
/// so jitter becomes head-of-line delay.
public struct KCPLatencySimulator: Sendable {
    /// KCP's `lostrate 10`, halved per direction.
    public static let defaultLossPercent = 5
    /// KCP's `rttmin 60`, halved: the smallest one-way delay.
    public static let minimumDelayMs: UInt64 = 30
    /// `rttmax / 2 - rttmin / 2`: delays are `30 + rand() % 32`, so 30 ... 61 ms.
    public static let delaySpreadMs: UInt32 = 32
    /// KCP's `nmax 1000`: datagrams a direction holds before it tail-drops.
    public static let queueCapacity = 1000

    public enum Peer: Int, Sendable { case a = 0, b = 1 }

    public enum SendOutcome: Equatable, Sendable {
        case lost
        case queueFull
        case queued(delayMs: UInt64)
    }

    /// Counters of one direction. `datagrams` and `bytes` include dropped datagrams, as KCP's `tx`.
    public struct DirectionStats: Equatable, Sendable {
        public var datagrams = 0
        public var bytes = 0
        public var lost = 0
        public var queueDropped = 0

        public init(datagrams: Int = 0, bytes: Int = 0, lost: Int = 0, queueDropped: Int = 0) {
            self.datagrams = datagrams
            self.bytes = bytes
            self.lost = lost
            self.queueDropped = queueDropped
        }
    }

    private struct Direction {
        var bag = KCPLossBag()
        var queue: [(due: UInt64, datagram: [UInt8])] = []
        var head = 0
        var stats = DirectionStats()
        var count: Int { queue.count - head }
    }

    private var random: GlibcRandom
    private var directions: [Direction] = [Direction(), Direction()]
    /// Loss threshold: a bag value below it drops the datagram.
    public let lossPercent: Int

    /// `lossPercent` is the per-direction loss (KCP's `lostrate / 2`); 0 still draws from the
    /// bags, as KCP does, so the delay sequence stays comparable.
    public init(seed: UInt32, lossPercent: Int = defaultLossPercent) {
        random = GlibcRandom(seed: seed)
        self.lossPercent = lossPercent
    }

    /// Hands `datagram` from `peer` to the link at `nowMs`.
    @discardableResult
    public mutating func send(from peer: Peer, _ datagram: [UInt8], nowMs: UInt64) -> SendOutcome {
        let d = peer.rawValue
        directions[d].stats.datagrams += 1
        directions[d].stats.bytes += datagram.count
        if directions[d].bag.draw(&random) < lossPercent {
            directions[d].stats.lost += 1
            return .lost
        }
        if directions[d].count >= Self.queueCapacity {
            directions[d].stats.queueDropped += 1
            return .queueFull
        }
        let delay = Self.minimumDelayMs + UInt64(random.next() % Self.delaySpreadMs)
        directions[d].queue.append((nowMs + delay, datagram))
        return .queued(delayMs: delay)
    }

    /// The datagram at the head of the queue towards `peer`, if it is due at `nowMs`.
    public mutating func receive(at peer: Peer, nowMs: UInt64) -> [UInt8]? {
        let d = 1 - peer.rawValue
        guard directions[d].count > 0, directions[d].queue[directions[d].head].due <= nowMs else { return nil }
        let datagram = directions[d].queue[directions[d].head].datagram
        directions[d].head += 1
        if directions[d].head >= 1024 && directions[d].head * 2 >= directions[d].queue.count {
            directions[d].queue.removeFirst(directions[d].head)
            directions[d].head = 0
        }
        return datagram
    }

    /// Counters of the direction that starts at `peer`.
    public func stats(from peer: Peer) -> DirectionStats { directions[peer.rawValue].stats }

    /// Datagrams queued towards the other side of `peer`.
    public func queued(from peer: Peer) -> Int { directions[peer.rawValue].count }
}

/// KCP's stratified loss: a bag of the values 0 ..< 100 drawn without replacement, refilled when
/// empty, so exactly `lossPercent` of every aligned 100 sends of a direction are lost.
public struct KCPLossBag: Sendable {
    /// Values in the bag; KCP's `Random(100)`.
    public static let size = 100
    private var slots = [Int](repeating: 0, count: size)
    private var live = 0

    public init() {}

    public mutating func draw(_ random: inout GlibcRandom) -> Int {
        if live == 0 {
            for i in 0 ..< Self.size { slots[i] = i }
            live = Self.size
        }
        let i = Int(random.next() % UInt32(live))
        let value = slots[i]
        live -= 1
        slots.swapAt(i, live)
        return value
    }
}
