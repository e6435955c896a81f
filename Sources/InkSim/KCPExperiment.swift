import InkProtocol

/// KCP's latency experiment (`test.cpp`), run in virtual time over `KCPLatencySimulator` with any
/// reliable endpoint pair, exactly as docs/notes/kcp-experiment.md describes.
///
/// 1 ms steps. Each step, in order: both peers get the time; A queues its due messages
/// (`[u32 index][u32 sendTime]`, little-endian as on KCP's x86, every 20 ms from t0 + 20);
/// due datagrams A->B go into B, then B->A into A; B echoes what it received; A measures what it
/// received. A stops after 1001 echoes. Endpoints send as soon as they are drained: after their
/// timeout, after A queues, after B echoes (so acks and echoes may share a datagram) and after A
/// measures.
public enum KCPExperiment {
    /// Echoes A waits for (KCP stops when `next > 1000`).
    public static let echoesWanted = 1001
    /// A sends one message every this many ms.
    public static let intervalMs: UInt64 = 20
    /// t0: the virtual clock's start, away from zero so no endpoint mistakes it for "unset".
    public static let startMs: UInt64 = 1_000
    /// A run that has not finished this long after the last message should have gone out is
    /// reported incomplete rather than run forever.
    public static let graceMs: UInt64 = 120_000
    /// Size of one message: `[u32 index][u32 sendTime]`.
    public static let messageSize = 8

    public struct Result: Sendable {
        public var seed: UInt32
        /// Round-trip times in ms, in the order the echoes arrived.
        public var rtts: [UInt32] = []
        /// Every echo carried the next index (false stops the run, as KCP's test does).
        public var inOrder = true
        /// All 1001 echoes arrived within the grace period.
        public var complete = false
        /// A->link and B->link counters (dropped datagrams included).
        public var a = KCPLatencySimulator.DirectionStats()
        public var b = KCPLatencySimulator.DirectionStats()
        /// Virtual ms the run took.
        public var durationMs: UInt64 = 0

        /// An empty result for `seed` (what an outside run of the experiment fills in).
        public init(seed: UInt32) {
            self.seed = seed
        }

        /// KCP's `avgrtt`: the integer mean.
        public var averageRTT: Int { rtts.isEmpty ? 0 : Int(rtts.reduce(0) { $0 + UInt64($1) } / UInt64(rtts.count)) }
        /// KCP's `maxrtt`.
        public var maxRTT: Int { Int(rtts.max() ?? 0) }
    }

    /// Runs one seed. `makeEndpoints(t0)` builds the A and B endpoints at the starting instant.
    public static func run(seed: UInt32, lossPercent: Int = KCPLatencySimulator.defaultLossPercent,
                           makeEndpoints: (Instant) -> (any SimReliableEndpoint, any SimReliableEndpoint)) -> Result {
        var link = KCPLatencySimulator(seed: seed, lossPercent: lossPercent)
        let (a, b) = makeEndpoints(.milliseconds(startMs))
        var result = Result(seed: seed)
        var nextSend = startMs + intervalMs
        var index: UInt32 = 0
        var expected: UInt32 = 0
        var pendingA: [[UInt8]] = []  // messages A's session refused for now
        var pendingB: [[UInt8]] = []  // echoes B's session refused for now
        let lastMs = startMs + UInt64(echoesWanted) * intervalMs + graceMs
        var nowMs = startMs

        func drain(_ e: any SimReliableEndpoint, _ peer: KCPLatencySimulator.Peer, _ now: Instant) {
            while let d = e.pollTransmit(now: now) { link.send(from: peer, d, nowMs: nowMs) }
        }
        func offer(_ e: any SimReliableEndpoint, _ pending: inout [[UInt8]]) {
            while let first = pending.first, e.submit(first) == .accepted { pending.removeFirst() }
        }

        while nowMs < lastMs {
            nowMs += 1
            let now = Instant.milliseconds(nowMs)
            // Both peers get the time.
            for (e, p) in [(a, KCPLatencySimulator.Peer.a), (b, .b)] {
                if let d = e.pollTimeout(), d <= now { e.handleTimeout(now: now) }
                drain(e, p, now)
            }
            // A queues its due messages.
            while nowMs >= nextSend {
                var m = [UInt8](repeating: 0, count: messageSize)
                put(index, into: &m, at: 0)
                put(UInt32(truncatingIfNeeded: nowMs), into: &m, at: 4)
                pendingA.append(m)
                index &+= 1
                nextSend += intervalMs
            }
            offer(a, &pendingA)
            drain(a, .a, now)
            // The network: A->B into B, then B->A into A.
            while let d = link.receive(at: .b, nowMs: nowMs) { b.handleDatagram(d, now: now) }
            while let d = link.receive(at: .a, nowMs: nowMs) { a.handleDatagram(d, now: now) }
            // B echoes everything it received, in order.
            while let event = b.nextSessionEvent() {
                if case .delivered(let m) = event { pendingB.append(m) }
            }
            offer(b, &pendingB)
            drain(b, .b, now)
            // A measures.
            while let event = a.nextSessionEvent() {
                guard case .delivered(let m) = event else { continue }
                guard m.count == messageSize, get(m, at: 0) == expected else {
                    result.inOrder = false
                    break
                }
                expected &+= 1
                result.rtts.append(UInt32(truncatingIfNeeded: nowMs) &- get(m, at: 4))
            }
            drain(a, .a, now)
            if !result.inOrder || result.rtts.count >= echoesWanted { break }
        }
        result.complete = result.inOrder && result.rtts.count >= echoesWanted
        result.a = link.stats(from: .a)
        result.b = link.stats(from: .b)
        result.durationMs = nowMs - startMs
        return result
    }

    private static func put(_ v: UInt32, into m: inout [UInt8], at i: Int) {
        for k in 0 ..< 4 { m[i + k] = UInt8(truncatingIfNeeded: v >> (8 * UInt32(k))) }
    }

    private static func get(_ m: [UInt8], at i: Int) -> UInt32 {
        (0 ..< 4).reduce(0) { $0 | UInt32(m[i + $1]) << (8 * UInt32($1)) }
    }
}
