import InkProtocol

/// Limits of the randomized fault sweep; every scenario is drawn inside them.
public struct SweepConfiguration: Sendable {
    /// Largest batch the workload produces (the session must carry it, fragmented if need be).
    public var maxBatchSize = 4096
    /// After healing, every accepted batch must be delivered within this long.
    public var healBound: Instant.Duration = .milliseconds(30_000)
    /// Nodes per scenario (2 ... maxNodes), each pair joined by one wire.
    public var maxNodes = 4
    /// Longest fault phase; partitions and pauses fit inside it.
    public var maxFaultPhase: Instant.Duration = .milliseconds(60_000)
    /// Longest partition.
    public var maxPartition: Instant.Duration = .milliseconds(30_000)
    /// Batches one endpoint produces at most, so a scenario's work is bounded.
    public var maxBatchesPerEndpoint = 300
    /// Batches the application holds while its session pushes back, before it stops producing.
    public var applicationBacklogLimit = 64
    /// Highest mean loss a direction gets during the fault phase.
    public var maxLoss = 0.6
    public init() {}
}

/// One randomized scenario, entirely decided by its seed: topology, each direction's faults,
/// partitions, pauses and each endpoint's traffic.
public struct SweepScenario: Sendable, CustomStringConvertible {
    public struct Wire: Sendable {
        public var nodes: (Int, Int)
        public var faulty: (LinkConfiguration, LinkConfiguration)
        public var healed: (LinkConfiguration, LinkConfiguration)
    }

    public struct Traffic: Sendable {
        /// Mean gap between batches.
        public var meanGap: Instant.Duration
        public var batches: Int
        /// Chance that a batch is large (more than one datagram).
        public var largeChance: Double
        /// A slow application takes delivered batches only this often (zero: at once), so the
        /// session's flow control has to hold the sender back.
        public var consumeEvery: Instant.Duration
    }

    public struct Window: Sendable {
        public var start: Instant
        public var end: Instant
        public var nodes: [Int]
    }

    public static let start = Instant.milliseconds(1_000)

    public var seed: UInt64
    public var nodeCount: Int
    public var wires: [Wire] = []
    /// Indexed by endpoint id: wire w holds endpoints 2w (first node) and 2w+1.
    public var traffic: [Traffic] = []
    public var partitions: [Window] = []
    public var pauses: [Window] = []
    /// End of the fault phase: from here every link is clean and no partition or pause is active.
    public var healAt: Instant

    public init(seed: UInt64, configuration c: SweepConfiguration = .init()) {
        var r = SimRandom(seed: seed)
        self.seed = seed
        nodeCount = r.int(in: 2 ... max(2, c.maxNodes))
        let phase = Instant.Duration(microseconds: 1_000_000 + r.below(c.maxFaultPhase.microseconds))
        healAt = Self.start + phase
        for a in 0 ..< nodeCount {
            for b in (a + 1) ..< nodeCount {
                let ab = Self.faultyLink(&r, c)
                let ba = Self.faultyLink(&r, c)
                wires.append(Wire(nodes: (a, b), faulty: (ab, ba), healed: (Self.healed(ab), Self.healed(ba))))
            }
        }
        for _ in 0 ..< (2 * wires.count) {
            traffic.append(Traffic(meanGap: .init(microseconds: 2_000 + r.below(300_000)),
                                   batches: r.int(in: 1 ... c.maxBatchesPerEndpoint),
                                   largeChance: r.chance(0.5) ? r.unit() * 0.2 : 0,
                                   consumeEvery: r.chance(0.2) ? .init(microseconds: r.below(250_000)) : .zero))
        }
        for _ in 0 ..< r.int(in: 0 ... 3) {
            let length = 100_000 + r.below(c.maxPartition.microseconds - 100_000)
            let start = Self.start + .init(microseconds: r.below(phase.microseconds))
            let end = min(start + .init(microseconds: length), healAt)
            var side = (0 ..< nodeCount).filter { _ in r.chance(0.5) }
            if side.isEmpty || side.count == nodeCount { side = [r.int(in: 0 ... nodeCount - 1)] }
            partitions.append(Window(start: start, end: end, nodes: side))
        }
        for _ in 0 ..< r.int(in: 0 ... 2) {
            let start = Self.start + .init(microseconds: r.below(phase.microseconds))
            let end = min(start + .init(microseconds: 100_000 + r.below(10_000_000)), healAt)
            pauses.append(Window(start: start, end: end, nodes: [r.int(in: 0 ... nodeCount - 1)]))
        }
    }

    private static func faultyLink(_ r: inout SimRandom, _ c: SweepConfiguration) -> LinkConfiguration {
        var l = LinkConfiguration()
        switch r.int(in: 0 ... 4) {
        case 0: l.loss = .none
        case 1: l.loss = .bernoulli(r.unit() * 0.05)
        case 2: l.loss = .bernoulli(r.unit() * c.maxLoss)
        default:
            var ge = GilbertElliott(goodToBad: 0.005 + r.unit() * 0.1, badToGood: 0.05 + r.unit() * 0.5,
                                    lossWhenGood: r.unit() * 0.05, lossWhenBad: 0.5 + r.unit() * 0.5)
            while ge.meanLoss > c.maxLoss { ge.goodToBad /= 2 }
            l.loss = .gilbertElliott(ge)
        }
        l.delay = .init(microseconds: 200 + r.below(150_000))
        l.jitter = r.chance(0.6) ? .init(microseconds: r.below(50_000)) : .zero
        l.keepsOrder = r.chance(0.3)
        if r.chance(0.3) {
            l.reorderChance = r.unit() * 0.1
            l.reorderDelay = .init(microseconds: 1_000 + r.below(100_000))
        }
        if r.chance(0.3) { l.duplicateChance = r.unit() * 0.1 }
        if r.chance(0.3) { l.bytesPerSecond = 20_000 + r.below(1_000_000) }
        l.queueCapacity = r.int(in: 32 ... 1000)
        return l
    }

    /// The same wire with its faults gone: no loss, duplication or hold-back; delay, jitter,
    /// bandwidth and queue stay, since those are not faults.
    private static func healed(_ l: LinkConfiguration) -> LinkConfiguration {
        var h = l
        h.loss = .none
        h.duplicateChance = 0
        h.reorderChance = 0
        return h
    }

    public var description: String {
        var lines = ["seed \(seed): \(nodeCount) nodes, \(wires.count) wires, heal at \(healAt)"]
        for (i, w) in wires.enumerated() {
            lines.append("  wire \(i) node \(w.nodes.0)<->\(w.nodes.1): \(Self.describe(w.faulty.0)) / \(Self.describe(w.faulty.1))")
        }
        for (i, t) in traffic.enumerated() {
            lines.append("  endpoint \(i): \(t.batches) batches, mean gap \(t.meanGap), large \(Int(t.largeChance * 100)) %, consumes every \(t.consumeEvery)")
        }
        for p in partitions { lines.append("  partition \(p.nodes) \(p.start) ..< \(p.end)") }
        for p in pauses { lines.append("  pause node \(p.nodes[0]) \(p.start) ..< \(p.end)") }
        return lines.joined(separator: "\n")
    }

    static func describe(_ l: LinkConfiguration) -> String {
        let loss: String
        switch l.loss {
        case .none: loss = "no loss"
        case .bernoulli(let p): loss = "loss \(Int(p * 1000)) permille"
        case .gilbertElliott(let g): loss = "GE loss \(Int(g.meanLoss * 1000)) permille"
        }
        var parts = [loss, "delay \(l.delay)+\(l.jitter)"]
        if l.keepsOrder { parts.append("fifo") }
        if l.reorderChance > 0 { parts.append("reorder \(Int(l.reorderChance * 1000)) permille") }
        if l.duplicateChance > 0 { parts.append("dup \(Int(l.duplicateChance * 1000)) permille") }
        if let b = l.bytesPerSecond { parts.append("\(b) B/s") }
        parts.append("queue \(l.queueCapacity)")
        return parts.joined(separator: ", ")
    }
}
