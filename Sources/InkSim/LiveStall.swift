import InkProtocol

/// Live drawing through a relay on a lossy path with short delay spikes: the scenario behind
/// the loss benchmark's rare multi-second stall (docs/benchmarks.md, docs/protocol.md section 5).
///
/// A drawer sends 60-459 byte batches every 60 ms in bursts of drawing (0.5-5.5 s) separated by
/// pauses (0-4 s); a relay session receives them and forwards each to a watcher over a second
/// wire. Both wires lose `lossPercent` of datagrams each way and delay them `oneWayDelay`,
/// in order. With `maxSpike` above zero, every 1-9 s one of the four directions is slowed by up
/// to `maxSpike` more for 50 ms (a starved process or packet forwarder); the datagrams behind
/// the slowed ones queue up, as on a real FIFO path. One seed decides every draw.
public struct LiveStallScenario: Sendable {
    /// Most messages one run may send (a bound for the latency table; 120 s of drawing is ~2000).
    public static let maxMessages = 1 << 16
    /// How long each delay spike lasts.
    public static let spikeLength = Instant.Duration.milliseconds(50)

    public var seed: UInt64
    public var maxSpike: Instant.Duration
    public var duration: Instant.Duration = .milliseconds(120_000)
    /// After `duration` the drawer stops; the run goes on until every message is delivered
    /// or this much longer.
    public var drainLimit = Instant.Duration.milliseconds(30_000)
    public var lossPercent = 10
    public var oneWayDelay = Instant.Duration.milliseconds(20)

    public init(seed: UInt64, maxSpike: Instant.Duration) {
        self.seed = seed
        self.maxSpike = maxSpike
    }
}

/// What one run of `LiveStallScenario` saw at the watcher.
public struct LiveStallOutcome: Sendable, Equatable {
    public var messagesSent = 0
    public var messagesDelivered = 0
    /// Deliveries that were not the next message in order (duplicate, gap or reordering).
    public var outOfOrderDeliveries = 0
    /// Longest time from the drawer's `send` to the watcher's delivery, and when that message was sent.
    public var worstLatency = Instant.Duration.zero
    public var worstSentAt = Instant.zero
    /// Delivered messages whose bytes differ from those sent.
    public var corruptDeliveries = 0
    /// Set when the network stopped the run (livelock, flood) or a session refused a message.
    public var failure: String?

    public init() {}
}

extension LiveStallScenario {
    /// Runs the scenario with sessions as shipped and returns what the watcher saw.
    public func run() -> LiveStallOutcome {
        var outcome = LiveStallOutcome()
        var draw = SimRandom(seed: seed)
        var spikeRandom = draw.split()
        let start = Instant.milliseconds(1000)
        let net = SimNetwork(seed: seed &* 7919, start: start)
        let drawer = ARQSession(now: net.now)
        let relayIn = ARQSession(now: net.now)
        let relayOut = ARQSession(now: net.now)
        let watcher = ARQSession(now: net.now)
        var link = LinkConfiguration()
        link.loss = .bernoulli(Double(lossPercent) / 100)
        link.delay = oneWayDelay
        link.keepsOrder = true
        var sentAt: [Instant] = []
        var sentSize: [Int] = []
        do {
            let (drawerID, relayInID) = try net.connect(drawer, node: 0, relayIn, node: 1, aToB: link, bToA: link)
            let (relayOutID, watcherID) = try net.connect(relayOut, node: 1, watcher, node: 2, aToB: link, bToA: link)
            let directions = [drawerID, relayInID, relayOutID, watcherID]
            var nextBatch = net.now + .milliseconds(60)
            let end = net.now + duration
            var nextSpike = net.now + .milliseconds(3000)
            var spikeEnd: Instant?
            var drawingUntil = net.now + .init(microseconds: 500_000 + draw.below(5_000_000))
            while net.now < end || (outcome.messagesDelivered < sentAt.count && net.now < end + drainLimit) {
                let drawing = net.now < end
                var t = net.nextEventTime() ?? (drawing ? nextBatch : end + drainLimit)
                if drawing { t = min(t, nextBatch) }
                if maxSpike.microseconds > 0, let next = spikeEnd ?? (drawing ? nextSpike : nil) { t = min(t, next) }
                try net.advance(to: t)
                if maxSpike.microseconds > 0 {
                    if let e = spikeEnd, !(net.now < e) {
                        for id in directions { net.setConfiguration(from: id, link) }
                        spikeEnd = nil
                    } else if spikeEnd == nil, net.now < end, !(net.now < nextSpike) {
                        var slow = link
                        slow.delay = oneWayDelay + .init(microseconds: spikeRandom.below(maxSpike.microseconds))
                        net.setConfiguration(from: directions[Int(spikeRandom.below(4))], slow)
                        spikeEnd = net.now + LiveStallScenario.spikeLength
                        nextSpike = net.now + .init(microseconds: 1_000_000 + spikeRandom.below(8_000_000))
                    }
                }
                if net.now < end, !(net.now < nextBatch) {
                    if net.now < drawingUntil, sentAt.count < LiveStallScenario.maxMessages {
                        let message = LiveStallScenario.message(index: sentAt.count, size: 60 + Int(draw.below(400)))
                        sentAt.append(net.now)
                        sentSize.append(message.count)
                        do { try drawer.send(message) } catch {
                            outcome.failure = "drawer refused message \(sentAt.count - 1): \(error)"
                            break
                        }
                        try net.flush(drawerID)
                        nextBatch = net.now + .milliseconds(60)
                    } else {
                        nextBatch = net.now + .init(microseconds: draw.below(4_000_000))
                        drawingUntil = nextBatch + .init(microseconds: 300_000 + draw.below(5_000_000))
                    }
                }
                while let event = relayIn.pollEvent() {
                    guard case .delivered(let m) = event else { continue }
                    do { try relayOut.send(m) } catch {
                        outcome.failure = "relay refused a message: \(error)"
                        break
                    }
                }
                if outcome.failure != nil { break }
                try net.flush(relayInID)
                try net.flush(relayOutID)
                while let event = watcher.pollEvent() {
                    guard case .delivered(let m) = event else { continue }
                    let expected = outcome.messagesDelivered
                    outcome.messagesDelivered += 1
                    guard let k = LiveStallScenario.index(of: m), k < sentAt.count else {
                        outcome.corruptDeliveries += 1
                        continue
                    }
                    if k != expected { outcome.outOfOrderDeliveries += 1 }
                    if m != LiveStallScenario.message(index: k, size: sentSize[k]) { outcome.corruptDeliveries += 1 }
                    let latency = net.now.since(sentAt[k])
                    if outcome.worstLatency < latency {
                        outcome.worstLatency = latency
                        outcome.worstSentAt = sentAt[k]
                    }
                }
                try net.flush(watcherID)
            }
        } catch {
            outcome.failure = "\(error)"
        }
        outcome.messagesSent = sentAt.count
        return outcome
    }

    /// Message `index`: its number in the first four bytes (little-endian), then a pattern.
    static func message(index: Int, size: Int) -> [UInt8] {
        var m = [UInt8](repeating: 0, count: max(size, 4))
        for i in 0..<m.count { m[i] = UInt8(truncatingIfNeeded: index &+ i) }
        for i in 0..<4 { m[i] = UInt8(truncatingIfNeeded: index >> (8 * i)) }
        return m
    }

    static func index(of message: [UInt8]) -> Int? {
        guard message.count >= 4 else { return nil }
        return (0..<4).reduce(0) { $0 | Int(message[$1]) << (8 * $1) }
    }
}
