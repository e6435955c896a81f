@testable import InkProtocol

/// glibc TYPE_3 `rand()`, the random source of KCP's test program.
struct GlibcRandom {
    private var r: [UInt32]
    private var k = 0

    init(seed: UInt32) {
        var s = [Int64](repeating: 0, count: 34)
        s[0] = Int64(seed == 0 ? 1 : seed)
        for i in 1..<31 {
            let hi = s[i - 1] / 127_773, lo = s[i - 1] % 127_773
            var w = 16_807 * lo - 2_836 * hi
            if w < 0 { w += 2_147_483_647 }
            s[i] = w
        }
        for i in 31..<34 { s[i] = s[i - 31] }
        r = s.map { UInt32(truncatingIfNeeded: $0) }
        for _ in 0..<310 { _ = next() }
    }

    mutating func next() -> UInt32 {
        // r[i] = r[i-3] + r[i-31]; keep the last 34 values in a ring.
        let n = r.count
        let v = r[(k + n - 3) % n] &+ r[(k + n - 31) % n]
        r[k] = v
        k = (k + 1) % n
        return v >> 1
    }
}

/// KCP's LatencySimulator: per-direction stratified loss bag, 30..61 ms delay, FIFO with
/// head-of-line delivery, queue cap 1000.
struct KCPLink {
    var random: GlibcRandom
    var bags: [[Int]] = [[], []]
    var queues: [[(due: Instant, bytes: [UInt8])]] = [[], []]
    var sent = [0, 0]
    var bytes = [0, 0]
    let lossPercent: Int

    init(seed: UInt32, lossPercent: Int = 5) {
        random = GlibcRandom(seed: seed)
        self.lossPercent = lossPercent
    }

    mutating func drawBag(_ d: Int) -> Int {
        if bags[d].isEmpty { bags[d] = Array(0..<100) }
        let i = Int(random.next() % UInt32(bags[d].count))
        let v = bags[d][i]
        bags[d].swapAt(i, bags[d].count - 1)
        bags[d].removeLast()
        return v
    }

    /// Returns the delay in ms, or nil when dropped.
    @discardableResult
    mutating func send(_ d: Int, _ datagram: [UInt8], now: Instant) -> Int? {
        sent[d] += 1
        bytes[d] += datagram.count
        if drawBag(d) < lossPercent { return nil }
        if queues[d].count >= 1000 { return nil }
        let delay = 30 + Int(random.next() % 32)
        queues[d].append((now + .milliseconds(UInt64(delay)), datagram))
        return delay
    }

    mutating func receive(_ d: Int, now: Instant) -> [UInt8]? {
        guard let head = queues[d].first, !(now < head.due) else { return nil }
        queues[d].removeFirst()
        return head.bytes
    }
}

struct KCPWorkloadResult {
    var rtts: [Int] = []
    var inOrder = true
    var datagramsA = 0
    var bytesA = 0
    var bytesB = 0
    var statsA = ARQStats()
    var statsB = ARQStats()
}

/// KCP's experiment: every 20 ms A sends `[u32 index][u32 sendTime]`, B echoes in order.
func runKCPWorkload(seed: UInt32, lossPercent: Int = 5, echoes: Int = 1001, configuration: ARQConfiguration = .init(),
                    trace: ((Instant, Int, [UInt8], Int?) -> Void)? = nil) -> KCPWorkloadResult {
    var link = KCPLink(seed: seed, lossPercent: lossPercent)
    let t0 = Instant.milliseconds(1_000)
    let a = ARQSession(configuration: configuration, now: t0)
    let b = ARQSession(configuration: configuration, now: t0)
    var result = KCPWorkloadResult()
    var nextIndex: UInt32 = 0
    var nextSendAt = t0 + .milliseconds(20)
    var expected: UInt32 = 0
    var now = t0
    func drain(_ s: ARQSession, _ d: Int) {
        while let datagram = s.pollTransmit(now: now) {
            let delay = link.send(d, datagram, now: now)
            trace?(now, d, datagram, delay)
        }
    }
    func be(_ x: UInt32) -> [UInt8] { [UInt8(x >> 24), UInt8(x >> 16 & 0xFF), UInt8(x >> 8 & 0xFF), UInt8(x & 0xFF)] }
    func rd(_ m: [UInt8], _ o: Int) -> UInt32 { UInt32(m[o]) << 24 | UInt32(m[o + 1]) << 16 | UInt32(m[o + 2]) << 8 | UInt32(m[o + 3]) }
    while result.rtts.count < echoes && now < t0 + .milliseconds(200_000) {
        now = now + .milliseconds(1)
        for (s, d) in [(a, 0), (b, 1)] {
            if let t = s.pollTimeout(), !(now < t) { s.handleTimeout(now: now) }
            drain(s, d)
        }
        while !(now < nextSendAt) {
            let ms = UInt32(truncatingIfNeeded: now.microseconds / 1000)
            try? a.send(be(nextIndex) + be(ms))
            nextIndex += 1
            nextSendAt = nextSendAt + .milliseconds(20)
        }
        drain(a, 0)
        while let datagram = link.receive(0, now: now) { b.handleDatagram(datagram, now: now) }
        while let datagram = link.receive(1, now: now) { a.handleDatagram(datagram, now: now) }
        while let e = b.pollEvent() { if case .delivered(let m) = e { try? b.send(m) } }
        drain(b, 1)
        while let e = a.pollEvent() {
            guard case .delivered(let m) = e, m.count == 8, result.rtts.count < echoes else { continue }
            if rd(m, 0) != expected { result.inOrder = false }
            expected = rd(m, 0) &+ 1
            let ms = UInt32(truncatingIfNeeded: now.microseconds / 1000)
            result.rtts.append(Int(ms &- rd(m, 4)))
        }
        drain(a, 0)
    }
    result.datagramsA = link.sent[0]
    result.bytesA = link.bytes[0]
    result.bytesB = link.bytes[1]
    result.statsA = a.stats
    result.statsB = b.stats
    return result
}
